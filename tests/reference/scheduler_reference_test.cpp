// Reference test of scheduler/standard (plugins/schedulers): for several
// configurations of every schedule it registers, factor(step, total) at
// EVERY step 0..total-1 must equal what transformers' schedule lambdas and
// torch's OneCycleLR give, computed at test time by
// tests/reference/scheduler_reference.py in the venv.
//
// Tolerance: 1e-12 absolute on the factor. Factors lie in [0, 1]; both sides
// evaluate the same IEEE-double formulas with the same libm, so they agree
// exactly, or within a few ulp (~1e-16) where the operation order differs:
// OneCycleLR works in absolute lrs that are divided by max_lr here (observed
// 2.2e-16; every LambdaLR schedule matched bit for bit). 1e-12 is far above
// that noise and far below any real mistake: an off-by-one step or a wrong
// ratio rounding moves a factor by more than 1e-6 in these runs.
//
// Quadratic warmup has no transformers equivalent; those configurations are
// checked against the formula written independently in the Python script.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace ftcore {
namespace {

using nlohmann::json;

constexpr double kTolerance = 1e-12;
constexpr const char* kLibrary = "libftcore_scheduler_standard.so";

struct Case {
  std::string scheduler;
  int64_t total;
  double base_lr;
  json options;  // only what a recipe would set
};

// Different totals, warmup as steps and as ratios (with ceil rounding that
// matters: 37 x 0.1 = 3.7 -> 4), linear and quadratic warmup, and each
// schedule's own keys away from their defaults.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"constant", 10, 1e-3, json::object()},
      {"constant", 50, 1e-3, {{"warmup_steps", 7}}},
      {"constant", 37, 1e-3, {{"warmup_ratio", 0.1}, {"warmup_type", "quadratic"}}},
      {"constant_with_warmup", 20, 1e-3, {{"warmup_steps", 5}}},
      {"constant_with_warmup", 33, 1e-3, {{"warmup_ratio", 0.25}}},
      {"linear", 1, 1e-3, json::object()},
      {"linear", 100, 1e-3, json::object()},
      {"linear", 100, 1e-3, {{"warmup_steps", 10}}},
      {"linear", 77, 1e-3, {{"warmup_ratio", 0.03}}},
      {"linear", 40, 1e-3, {{"warmup_steps", 40}}},
      {"linear", 60, 1e-3, {{"warmup_steps", 12}, {"warmup_type", "quadratic"}}},
      {"cosine", 100, 1e-3, {{"warmup_steps", 10}}},
      {"cosine", 250, 1e-3, {{"warmup_ratio", 0.05}}},
      {"cosine", 120, 1e-3, {{"num_cycles", 1.5}}},
      {"cosine", 200, 1e-3, {{"warmup_steps", 20}, {"num_cycles", 2.0}}},
      {"cosine", 100, 1e-3, {{"warmup_steps", 10}, {"cosine_min_lr_ratio", 0.1}}},
      {"cosine", 180, 1e-3, {{"warmup_ratio", 0.1}, {"cosine_min_lr_ratio", 0.2}, {"num_cycles", 1.25}}},
      {"cosine", 100, 1e-3, {{"warmup_steps", 10}, {"cosine_min_lr_ratio", 0.1}, {"cosine_constant_lr_ratio", 0.8}}},
      {"cosine", 333, 1e-3,
       {{"warmup_ratio", 0.03}, {"cosine_min_lr_ratio", 0.05}, {"cosine_constant_lr_ratio", 0.6}}},
      {"cosine", 90, 1e-3, {{"warmup_steps", 5}, {"cosine_constant_lr_ratio", 0.5}}},
      {"cosine", 100, 1e-3, {{"warmup_steps", 25}, {"warmup_type", "quadratic"}}},
      {"cosine", 150, 1e-3, {{"warmup_steps", 15}, {"warmup_type", "quadratic"}, {"cosine_min_lr_ratio", 0.1}}},
      {"cosine_with_restarts", 100, 1e-3, {{"warmup_steps", 10}}},
      {"cosine_with_restarts", 300, 1e-3, {{"num_cycles", 3}}},
      {"cosine_with_restarts", 257, 1e-3, {{"warmup_ratio", 0.1}, {"num_cycles", 4}}},
      {"cosine_with_restarts", 64, 1e-3, {{"warmup_steps", 8}, {"num_cycles", 2}, {"warmup_type", "quadratic"}}},
      {"polynomial", 100, 1e-3, {{"warmup_steps", 10}}},
      {"polynomial", 150, 5e-4, {{"power", 2.0}, {"lr_end", 1e-5}}},
      {"polynomial", 90, 2e-5, {{"warmup_ratio", 0.2}, {"power", 0.5}, {"lr_end", 0.0}}},
      {"polynomial", 80, 1e-4, {{"warmup_steps", 10}, {"power", 3.0}, {"lr_end", 1e-6}, {"warmup_type", "quadratic"}}},
      {"inverse_sqrt", 200, 1e-3, json::object()},
      {"inverse_sqrt", 200, 1e-3, {{"warmup_steps", 20}}},
      {"inverse_sqrt", 300, 1e-3, {{"warmup_steps", 16}, {"timescale", 100}}},
      {"inverse_sqrt", 150, 1e-3, {{"warmup_ratio", 0.1}}},
      {"inverse_sqrt", 100, 1e-3, {{"warmup_steps", 10}, {"warmup_type", "quadratic"}}},
      {"one_cycle", 100, 1e-3, json::object()},
      {"one_cycle", 7, 1e-3, json::object()},
      {"one_cycle", 1000, 3e-4, {{"pct_start", 0.25}, {"anneal_strategy", "linear"}}},
      {"one_cycle", 500, 1e-2, {{"three_phase", true}, {"div_factor", 10.0}, {"final_div_factor", 100.0}}},
      {"one_cycle", 200, 1e-3, {{"warmup_steps", 30}}},
      {"one_cycle", 333, 1e-3, {{"warmup_ratio", 0.1}, {"anneal_strategy", "linear"}, {"three_phase", true}}},
      {"warmup_stable_decay", 100, 1e-3, {{"warmup_steps", 10}, {"num_decay_steps", 20}}},
      {"warmup_stable_decay", 200, 1e-3,
       {{"warmup_ratio", 0.05}, {"decay_ratio", 0.2}, {"decay_type", "linear"}, {"min_lr_ratio", 0.1}}},
      {"warmup_stable_decay", 150, 1e-3,
       {{"warmup_steps", 5}, {"num_stable_steps", 100}, {"num_decay_steps", 30}, {"decay_type", "1-sqrt"},
        {"min_lr_ratio", 0.05}}},
      {"warmup_stable_decay", 120, 1e-3, json::object()},
      {"warmup_stable_decay", 150, 1e-3, {{"warmup_ratio", 0.07}, {"decay_ratio", 0.15}, {"min_lr_ratio", 0.01}}},
      {"warmup_stable_decay", 160, 1e-3, {{"warmup_steps", 16}, {"num_decay_steps", 40}, {"num_cycles", 1.0}}},
      {"warmup_stable_decay", 100, 1e-3,
       {{"warmup_steps", 10}, {"warmup_type", "quadratic"}, {"min_lr_ratio", 0.2}, {"num_decay_steps", 25}}},
  };
  return all;
}

std::string case_id(size_t index) {
  const Case& c = cases()[index];
  return c.scheduler + "#" + std::to_string(index) + " T=" + std::to_string(c.total) + " " + c.options.dump();
}

PluginRegistry& registry() { return testing::in_tree_registry(); }

const RegistryEntry& entry_for(const std::string& name) {
  return testing::in_tree_entry(sdk::ComponentKind::Scheduler, name);
}

// The schedulers of this plugin library (others may register more).
std::vector<const RegistryEntry*> standard_entries() {
  std::vector<const RegistryEntry*> out;
  for (const RegistryEntry* e : registry().entries(sdk::ComponentKind::Scheduler))
    if (e->library_path().filename() == kLibrary) out.push_back(e);
  return out;
}

sdk::ParamValue to_param_value(const sdk::Param& param, const json& value) {
  switch (param.type) {
    case sdk::ParamType::Bool: return value.get<bool>();
    case sdk::ParamType::Int: return value.get<int64_t>();
    case sdk::ParamType::Float: return value.get<double>();
    case sdk::ParamType::String:
    case sdk::ParamType::Enum: return value.get<std::string>();
    default: throw std::runtime_error("no test conversion for the type of " + param.key);
  }
}

sdk::Options options_of(const RegistryEntry& entry, const json& options) {
  std::map<std::string, sdk::ParamValue> values;
  for (const auto& [key, value] : options.items()) {
    const sdk::Param* param = entry.params->find(key);
    if (!param) throw std::runtime_error(entry.key() + " declares no key " + key);
    values[key] = to_param_value(*param, value);
  }
  return testing::options_for(entry, std::move(values));
}

// Reference factors of every case of `scheduler`, by case index.
std::map<size_t, std::vector<double>> reference_factors(const std::string& scheduler) {
  json request = json::array();
  for (size_t i = 0; i < cases().size(); ++i) {
    const Case& c = cases()[i];
    if (c.scheduler != scheduler) continue;
    request.push_back({{"id", std::to_string(i)}, {"scheduler", c.scheduler}, {"total", c.total},
                       {"base_lr", c.base_lr}, {"options", c.options}});
  }
  const json reply =
      json::parse(testing::run_python("reference/scheduler_reference.py", testing::shell_quote(request.dump())));
  std::map<size_t, std::vector<double>> out;
  for (const json& r : reply) out[std::stoul(r.at("id").get<std::string>())] = r.at("factors").get<std::vector<double>>();
  return out;
}

void expect_matches_reference(const std::string& scheduler) {
  std::map<size_t, std::vector<double>> reference;
  ASSERT_NO_THROW(reference = reference_factors(scheduler));
  ASSERT_FALSE(reference.empty()) << "no cases for " << scheduler;
  double worst = 0.0;
  for (const auto& [index, expected] : reference) {
    const Case& c = cases()[index];
    SCOPED_TRACE(case_id(index));
    const RegistryEntry& entry = entry_for(scheduler);
    std::shared_ptr<sdk::Scheduler> schedule;
    ASSERT_NO_THROW(schedule = registry().create_scheduler(entry, options_of(entry, c.options),
                                                           sdk::SchedulerContext{c.base_lr}));
    ASSERT_EQ(expected.size(), static_cast<size_t>(c.total));
    double max_diff = 0.0;
    int64_t first_bad = -1;
    double ours_at_bad = 0.0;
    for (int64_t step = 0; step < c.total; ++step) {
      const double ours = schedule->factor(step, c.total);
      const double diff = std::abs(ours - expected[step]);
      if (!(diff <= kTolerance) && first_bad < 0) {  // NaN counts as off
        first_bad = step;
        ours_at_bad = ours;
      }
      max_diff = std::max(max_diff, std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff);
    }
    worst = std::max(worst, max_diff);
    if (first_bad >= 0) {
      ADD_FAILURE() << std::setprecision(17) << "step " << first_bad << " is the first off by more than "
                    << kTolerance << ": ftcore " << ours_at_bad << ", reference " << expected[first_bad]
                    << "; max |diff| over the run " << max_diff;
    }
  }
  std::printf("%s: %zu configurations, max |ftcore - reference| = %.3g\n", scheduler.c_str(), reference.size(),
              worst);
}

TEST(SchedulerReference, Constant) { expect_matches_reference("constant"); }
TEST(SchedulerReference, ConstantWithWarmup) { expect_matches_reference("constant_with_warmup"); }
TEST(SchedulerReference, Linear) { expect_matches_reference("linear"); }
TEST(SchedulerReference, Cosine) { expect_matches_reference("cosine"); }
TEST(SchedulerReference, CosineWithRestarts) { expect_matches_reference("cosine_with_restarts"); }
TEST(SchedulerReference, Polynomial) { expect_matches_reference("polynomial"); }
TEST(SchedulerReference, InverseSqrt) { expect_matches_reference("inverse_sqrt"); }
TEST(SchedulerReference, OneCycle) { expect_matches_reference("one_cycle"); }
TEST(SchedulerReference, WarmupStableDecay) { expect_matches_reference("warmup_stable_decay"); }

TEST(SchedulerReference, EveryStandardSchedulerHasReferenceCases) {
  std::set<std::string> registered, tested;
  for (const RegistryEntry* e : standard_entries()) registered.insert(e->name);
  for (const Case& c : cases()) tested.insert(c.scheduler);
  EXPECT_EQ(registered.size(), 9u) << "the plugin registers the schedules of README.md";
  EXPECT_EQ(registered, tested);
}

bool declares_exclusive(const sdk::ParamSpec& spec, const std::string& a, const std::string& b) {
  for (const auto& set : spec.exclusive_sets())
    if (std::count(set.begin(), set.end(), a) && std::count(set.begin(), set.end(), b)) return true;
  return false;
}

TEST(SchedulerSpec, WarmupStepsAndRatioAreExclusiveEverywhere) {
  for (const RegistryEntry* e : standard_entries())
    EXPECT_TRUE(declares_exclusive(*e->params, "warmup_steps", "warmup_ratio")) << e->key();
  const sdk::ParamSpec& one_cycle = *entry_for("one_cycle").params;
  EXPECT_TRUE(declares_exclusive(one_cycle, "pct_start", "warmup_steps"));
  EXPECT_TRUE(declares_exclusive(one_cycle, "pct_start", "warmup_ratio"));
  EXPECT_TRUE(declares_exclusive(*entry_for("warmup_stable_decay").params, "num_decay_steps", "decay_ratio"));
}

TEST(SchedulerSpec, EveryKeyHasADocAndNumbersHaveARange) {
  for (const RegistryEntry* e : standard_entries()) {
    for (const sdk::Param& p : e->params->params()) {
      EXPECT_FALSE(p.doc.empty()) << e->key() << "." << p.key;
      if (p.type == sdk::ParamType::Int || p.type == sdk::ParamType::Float) {
        EXPECT_TRUE(p.range.has_value()) << e->key() << "." << p.key;
      }
    }
  }
}

std::string creation_error(const std::string& name, const json& options, double base_lr) {
  const RegistryEntry& entry = entry_for(name);
  try {
    registry().create_scheduler(entry, options_of(entry, options), sdk::SchedulerContext{base_lr});
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(SchedulerSpec, FactoriesRefuseContradictionsWithASentence) {
  EXPECT_NE(creation_error("polynomial", {{"lr_end", 1e-3}}, 1e-3).find("lr_end (0.001) must be smaller"),
            std::string::npos);
  EXPECT_NE(creation_error("polynomial", {{"lr_end", 1e-2}}, 1e-3).find("base lr"), std::string::npos);
  EXPECT_EQ(creation_error("polynomial", {{"lr_end", 1e-4}}, 1e-3), "");
  EXPECT_NE(creation_error("one_cycle", {{"warmup_type", "linear"}}, 1e-3).find("warmup_type"), std::string::npos);
  EXPECT_NE(creation_error("warmup_stable_decay", {{"warmup_ratio", 0.5}, {"decay_ratio", 0.6}}, 1e-3).find("exceed 1"),
            std::string::npos);
}

}  // namespace
}  // namespace ftcore

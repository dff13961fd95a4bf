// summary.json and experiment.json (ab_summary.h).
#include "ab_summary.h"

#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include "ftcore/atomic_file.h"
#include "ftcore/build_info.h"
#include "paired_statistics.h"

namespace fs = std::filesystem;

namespace ftcore::ab {

namespace {

// JSON has no infinity: non-finite values (a CI of one seed, an MDE that no
// number of seeds reaches) are written as the strings "inf", "-inf", "nan".
nlohmann::json number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

nlohmann::json comparison_json(const PairedComparison& c) {
  return {{"n", c.n}, {"deltas", c.deltas}, {"mean_delta", number(c.mean_delta)}, {"sd_delta", number(c.sd_delta)},
          {"ci95", {number(c.ci_low), number(c.ci_high)}}, {"ci_method", c.ci_method},
          {"t_statistic", number(c.t_statistic)}, {"t_p_value", number(c.t_p_value)},
          {"wilcoxon_statistic", number(c.wilcoxon_statistic)}, {"wilcoxon_p_value", number(c.wilcoxon_p_value)},
          {"wilcoxon_method", c.wilcoxon_method}, {"holm_p_value", number(c.holm_p_value)},
          {"probability_of_improvement", number(c.probability_of_improvement)}, {"cohens_dz", number(c.cohens_dz)},
          {"minimum_detectable_effect", number(c.minimum_detectable_effect)}, {"verdict", c.verdict}};
}

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(in, line)) {
    if (model.empty() && line.rfind("model name", 0) == 0) model = line.substr(line.find(':') + 2);
    if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
  }
  const bool avx512 = flags.find(" avx512f") != std::string::npos, amx = flags.find(" amx_bf16") != std::string::npos;
  return model + " (" + std::to_string(std::thread::hardware_concurrency()) + " threads, " +
         (avx512 ? std::string("AVX-512") + (amx ? " + AMX-BF16" : " without AMX") : "no AVX-512") + ")";
}

// The provenance comment lines of the control's first recipe.lock.toml
// (versions, plugin files and sha256, model and data hashes).
std::vector<std::string> lock_provenance(const ExperimentRuns& runs) {
  std::vector<std::string> lines;
  for (const RunRecord& r : runs.runs) {
    std::ifstream in(r.dir / "recipe.lock.toml");
    if (!in) continue;
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("# ", 0) == 0) lines.push_back(line.substr(2));
    break;
  }
  return lines;
}

}  // namespace

std::map<std::string, std::vector<std::string>> arm_differences(const std::vector<ResolvedSettings>& settings) {
  std::set<std::string> keys;
  for (const auto& s : settings)
    for (const auto& [k, v] : s) keys.insert(k);
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& k : keys) {
    std::vector<std::string> values;
    for (const auto& s : settings) values.push_back(s.count(k) ? s.at(k) : "(unset)");
    if (std::set<std::string>(values.begin(), values.end()).size() > 1) out[k] = values;
  }
  return out;
}

nlohmann::json build_summary(const Experiment& e, const std::vector<ResolvedSettings>& settings,
                             const ExperimentRuns& runs) {
  nlohmann::json s;
  nlohmann::json arms = nlohmann::json::array();
  for (const Arm& a : e.arms)
    arms.push_back({{"name", a.name}, {"recipe", a.recipe.string()}, {"set", a.overrides}, {"aa", a.aa_copy}});
  s["experiment"] = {{"control", e.arms.front().name}, {"arms", arms}, {"seeds", e.seeds}, {"metric", e.metric},
                     {"bootstrap", {{"method", "BCa"}, {"resamples", kBootstrapResamples}, {"seed", kBootstrapSeed}}},
                     {"alpha", 0.05}, {"multiple_comparisons", "Holm"}};
  s["arm_differences"] = arm_differences(settings);
  s["provenance"] = {{"ftcore", build_info::kVersion}, {"libtorch", build_info::kTorchVersion},
                     {"machine", cpu_description()}, {"lock", lock_provenance(runs)}};
  nlohmann::json run_list = nlohmann::json::array();
  for (const RunRecord& r : runs.runs) {
    if (!r.finished) continue;
    nlohmann::json curve = nlohmann::json::array();
    for (const auto& [step, loss] : eval_loss_curve(r.dir)) curve.push_back({step, loss});
    run_list.push_back({{"arm", r.arm}, {"seed", r.seed}, {"dir", r.dir.string()}, {"metrics", r.metrics},
                        {"eval_loss_curve", curve}});
  }
  s["runs"] = run_list;
  s["stopped_hopeless"] = runs.stopped_hopeless;
  nlohmann::json stats = nlohmann::json::object();
  for (const std::string& metric : metric_names()) {
    std::vector<PairedComparison> comparisons;
    std::vector<std::string> names;
    for (size_t a = 1; a < e.arms.size(); ++a) {
      const auto [control, treatment] = paired_values(e, runs, e.arms[a].name, metric);
      if (control.size() < 2) continue;
      comparisons.push_back(compare_paired(control, treatment, higher_is_better(metric), kBootstrapSeed, kBootstrapResamples));
      names.push_back(e.arms[a].name);
    }
    if (comparisons.empty()) continue;
    std::vector<PairedComparison*> family;
    for (auto& c : comparisons) family.push_back(&c);
    holm_adjust(family);
    for (size_t i = 0; i < comparisons.size(); ++i) {
      stats[metric][names[i]] = comparison_json(comparisons[i]);
      stats[metric][names[i]]["higher_is_better"] = higher_is_better(metric);
    }
  }
  s["statistics"] = stats;
  nlohmann::json verdicts = nlohmann::json::object();
  if (stats.contains(e.metric))
    for (auto& [arm, c] : stats[e.metric].items()) verdicts[arm] = c["verdict"];
  s["verdicts"] = verdicts;
  return s;
}

void save_experiment(const Experiment& e, const std::vector<ResolvedSettings>& settings) {
  nlohmann::json arms = nlohmann::json::array();
  for (size_t i = 0; i < e.arms.size(); ++i) {
    const Arm& a = e.arms[i];
    arms.push_back({{"name", a.name}, {"recipe", fs::absolute(a.recipe).string()}, {"set", a.overrides},
                    {"aa", a.aa_copy}, {"settings", settings[i]}});
  }
  nlohmann::json j = {{"arms", arms}, {"seeds", e.seeds}, {"metric", e.metric}, {"jobs", e.jobs},
                      {"source", e.source.string()}};
  if (e.stop_hopeless) j["stop_hopeless"] = *e.stop_hopeless;
  fs::create_directories(e.out_dir);
  write_file_atomically(e.out_dir / "experiment.json", j.dump(2) + "\n");
}

Experiment load_experiment(const fs::path& dir, std::vector<ResolvedSettings>& settings) {
  std::ifstream in(dir / "experiment.json");
  if (!in)
    throw ConfigError({{{(dir / "experiment.json").string(), 0, 0}, "not an experiment folder (no experiment.json): run `ftcore ab` first"}});
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw ConfigError({{{(dir / "experiment.json").string(), 0, 0}, "experiment.json is not valid JSON"}});
  Experiment e;
  e.out_dir = dir;
  e.seeds = j.at("seeds").get<std::vector<int64_t>>();
  e.metric = j.at("metric").get<std::string>();
  e.jobs = j.at("jobs").get<int>();
  if (j.contains("stop_hopeless")) e.stop_hopeless = j["stop_hopeless"].get<double>();
  settings.clear();
  for (const auto& a : j.at("arms")) {
    Arm arm;
    arm.name = a.at("name").get<std::string>();
    arm.recipe = a.at("recipe").get<std::string>();
    arm.overrides = a.at("set").get<std::vector<std::string>>();
    arm.aa_copy = a.at("aa").get<bool>();
    e.arms.push_back(std::move(arm));
    settings.push_back(a.at("settings").get<ResolvedSettings>());
  }
  return e;
}

}  // namespace ftcore::ab

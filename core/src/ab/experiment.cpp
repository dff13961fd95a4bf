// Experiments from the command line or a file, and their arms resolved (experiment.h).
#include "experiment.h"

#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "../cli/session.h"
#include "ftcore/recipe.h"
#include "ftcore/sdk/params.h"

namespace fs = std::filesystem;

namespace ftcore::ab {

namespace {

ConfigError error_at(SourcePos where, std::string message) { return ConfigError({{std::move(where), std::move(message)}}); }

sdk::ParamSpec experiment_spec() {
  sdk::ParamSpec s;
  s.add_string("base", std::nullopt).make_required().with_doc("The recipe every arm starts from (relative to this file).");
  s.add_int("seeds", 5).at_least(2).with_doc("Seeds 1..N; each arm runs once per seed.");
  s.add_int_list("seed_list", {}).with_doc("Explicit seeds (instead of seeds).");
  s.add_string("metric", "eval_loss").with_doc("The metric the verdict and --stop-hopeless use.");
  s.add_int("jobs", 1).at_least(1).with_doc("Runs at once (the cores are divided between them).");
  s.add_string("out", std::nullopt).with_doc("Experiment folder (default runs/ab/<file stem>).");
  s.add_float("stop_hopeless", std::nullopt).above(0.0).with_doc("Stop giving seeds to an arm worse than the control by this margin.");
  s.add_bool("aa", false).with_doc("Add an A/A arm (the control again) to measure the noise floor.");
  return s;
}

sdk::ParamSpec arm_spec() {
  sdk::ParamSpec s;
  s.add_string("name", std::nullopt).make_required().with_doc("The arm's name (its runs live in runs/<name>/).");
  s.add_string("recipe", std::nullopt).with_doc("Another recipe instead of the experiment's base.");
  return s;
}

// The TOML value of an arm's `set` entry as --set text ("optimizer.lr=3e-05").
std::string assignment(const std::string& key, const toml::node& value) {
  std::ostringstream out;
  value.visit([&](const auto& v) { out << v; });  // TOML syntax: strings quoted, arrays bracketed
  return key + "=" + out.str();
}

// recipe.lock.toml settings -> "section.key" -> value (arrays of tables indexed).
ResolvedSettings settings_of(const std::string& lock) {
  ResolvedSettings out;
  std::istringstream in(lock);
  std::string line, section;
  std::map<std::string, int> repeats;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("[[", 0) == 0) {
      const std::string name = line.substr(2, line.find("]]") - 2);
      section = name + "." + std::to_string(repeats[name]++);
    } else if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (const auto eq = line.find(" = "); eq != std::string::npos) {
      out[section + "." + line.substr(0, eq)] = line.substr(eq + 3);
    }
  }
  for (const char* k : {"train.seed", "train.output_dir", "train.run_name", "train.resume_from_checkpoint"}) out.erase(k);
  return out;
}

}  // namespace

Experiment read_experiment_file(const fs::path& path) {
  toml::table root;
  try {
    root = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    throw error_at({path.string(), static_cast<int>(e.source().begin.line), static_cast<int>(e.source().begin.column)},
                   std::string("TOML syntax error: ") + std::string(e.description()));
  }
  std::vector<Diagnostic> problems;
  for (const auto& [key, node] : root)
    if (key.str() != "experiment" && key.str() != "arm")
      problems.push_back({source_of(key, node), "unknown section [" + std::string(key.str()) + "]; an experiment has [experiment] and [[arm]]"});
  Experiment e;
  e.source = path;
  const fs::path here = path.parent_path();
  const toml::table* table = root["experiment"].as_table();
  if (!table) throw error_at({path.string(), 1, 1}, "no [experiment] table (base, seeds, metric, jobs)");
  const auto spec = std::make_shared<const sdk::ParamSpec>(experiment_spec());
  const sdk::Options o(spec, validate_table(*table, *spec, "[experiment]", {}, problems));
  const toml::array* arms = root["arm"].as_array();
  if (!arms || arms->empty()) problems.push_back({source_of(*table), "no [[arm]] tables: an experiment needs at least two arms"});
  const auto arm_keys = std::make_shared<const sdk::ParamSpec>(arm_spec());
  for (size_t i = 0; arms && i < arms->size(); ++i) {
    const toml::table* t = arms->get(i)->as_table();
    if (!t) {
      problems.push_back({source_of(*arms->get(i)), "each [[arm]] must be a table"});
      continue;
    }
    const sdk::Options a(arm_keys, validate_table(*t, *arm_keys, "[[arm]] #" + std::to_string(i + 1), {"set"}, problems));
    if (!a.has_value("name")) continue;
    Arm arm;
    arm.name = a.get_string("name");
    arm.where = source_of(*t);
    if (o.has_value("base")) arm.recipe = here / o.get_string("base");
    if (a.has_value("recipe")) arm.recipe = here / a.get_string("recipe");
    if (const toml::node* set = t->get("set")) {
      if (const toml::table* assignments = set->as_table()) {
        for (const auto& [k, v] : *assignments) arm.overrides.push_back(assignment(std::string(k.str()), v));
      } else {
        problems.push_back({source_of(*set), "[[arm]] set must be a table: set = { \"optimizer.lr\" = 3e-5 }"});
      }
    }
    e.arms.push_back(std::move(arm));
  }
  if (!problems.empty()) throw ConfigError(problems);
  if (!o.get_int_list("seed_list").empty()) {
    e.seeds = o.get_int_list("seed_list");
  } else {
    for (int64_t k = 1; k <= o.get_int("seeds"); ++k) e.seeds.push_back(k);
  }
  e.metric = o.get_string("metric");
  e.jobs = static_cast<int>(o.get_int("jobs"));
  e.out_dir = o.has_value("out") ? here / o.get_string("out") : fs::path("runs") / "ab" / path.stem();
  if (o.has_value("stop_hopeless")) e.stop_hopeless = o.get_float("stop_hopeless");
  if (o.get_bool("aa")) add_aa_arm(e);
  return e;
}

std::vector<Arm> arms_from_recipes(const std::vector<fs::path>& recipes, const std::vector<std::string>& overrides) {
  std::vector<Arm> arms;
  std::set<std::string> taken;
  for (const fs::path& r : recipes) {
    Arm a;
    a.name = r.stem().string();
    for (int k = 2; taken.count(a.name); ++k) a.name = r.stem().string() + "-" + std::to_string(k);
    taken.insert(a.name);
    a.recipe = r;
    a.overrides = overrides;
    a.where = {r.string(), 0, 0};
    arms.push_back(std::move(a));
  }
  return arms;
}

std::vector<int64_t> parse_seed_list(const std::string& text) {
  std::vector<int64_t> seeds;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 0)
      throw error_at({"--seed-list", 0, 0}, "\"" + text + "\": expected non-negative integers separated by commas");
    seeds.push_back(v);
  }
  return seeds;
}

void add_aa_arm(Experiment& e) {
  if (e.arms.empty()) return;
  Arm copy = e.arms.front();
  copy.name = e.arms.front().name + "-aa";
  copy.aa_copy = true;
  e.arms.push_back(std::move(copy));
}

void check_experiment(const Experiment& e) {
  const SourcePos where = e.source.empty() ? SourcePos{"ftcore ab", 0, 0} : SourcePos{e.source.string(), 0, 0};
  if (e.arms.size() - std::count_if(e.arms.begin(), e.arms.end(), [](const Arm& a) { return a.aa_copy; }) < 2)
    throw error_at(where, "an experiment needs at least two arms (the first is the control)");
  std::set<int64_t> unique(e.seeds.begin(), e.seeds.end());
  if (e.seeds.size() < 2 || unique.size() != e.seeds.size())
    throw error_at(where, "an experiment needs at least two distinct seeds (got " + std::to_string(e.seeds.size()) +
                              "): paired statistics compare arms seed by seed");
  std::set<std::string> names;
  for (const Arm& a : e.arms)
    if (!names.insert(a.name).second) throw error_at(a.where, "two arms are named \"" + a.name + "\"");
  for (const Arm& a : e.arms)
    if (!fs::exists(a.recipe)) throw error_at(a.where, "arm \"" + a.name + "\": recipe " + a.recipe.string() + " not found");
}

std::vector<ResolvedSettings> resolve_arms(const Experiment& e, const std::vector<std::string>& plugin_paths) {
  std::vector<ResolvedSettings> out;
  std::vector<Diagnostic> problems;
  for (const Arm& a : e.arms) {
    try {
      out.push_back(settings_of(cli::load_and_validate(a.recipe, a.overrides, plugin_paths)->recipe.lock_toml()));
    } catch (const ConfigError& error) {
      problems.push_back({a.where, "arm \"" + a.name + "\" does not validate:"});
      for (const Diagnostic& d : error.diagnostics()) problems.push_back(d);
      out.emplace_back();
    }
  }
  if (!problems.empty()) throw ConfigError(problems);
  for (size_t i = 0; i < e.arms.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[i] == out[j] && !e.arms[i].aa_copy && !e.arms[j].aa_copy)
        throw error_at(e.arms[i].where, "arms \"" + e.arms[j].name + "\" and \"" + e.arms[i].name +
                                            "\" resolve to the same settings: there is nothing to compare (use --aa "
                                            "for an A/A noise-floor arm)");
  return out;
}

}  // namespace ftcore::ab

// An A/B experiment: arms (the first is the control) x seeds, each pair one
// ordinary `ftcore run` folder. Two ways to say it:
//
//   ftcore ab A.toml B.toml [C.toml ...] [--seeds N | --seed-list 1,2,3] [--set k=v]... [--aa]
//   ftcore ab EXPERIMENT.toml      # [experiment] base/seeds/metric/jobs + [[arm]] name/set
//
// Both become an Experiment; resolve_arms() then validates each arm's recipe
// as `ftcore run` would and returns its resolved settings, so arms that are
// the same experiment twice are refused before anything runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ftcore/diagnostics.h"

namespace ftcore::ab {

struct Arm {
  std::string name;
  std::filesystem::path recipe;
  std::vector<std::string> overrides;  // --set assignments: the command line's, then the arm's own
  SourcePos where;                     // where the arm is declared
  bool aa_copy = false;                // the --aa arm: the control again, to measure the noise floor
};

struct Experiment {
  std::vector<Arm> arms;  // arms[0] is the control
  std::vector<int64_t> seeds;
  std::string metric = "eval_loss";
  int jobs = 1;
  std::filesystem::path out_dir;
  std::optional<double> stop_hopeless;  // margin in the metric's units
  std::filesystem::path source;         // the experiment file, or empty
};

// From an experiment file; throws ConfigError with every problem located.
Experiment read_experiment_file(const std::filesystem::path& path);

// Arms named after their recipe files (stem; made unique).
std::vector<Arm> arms_from_recipes(const std::vector<std::filesystem::path>& recipes,
                                   const std::vector<std::string>& overrides);

// "1,2,3" -> seeds; throws ConfigError naming the flag.
std::vector<int64_t> parse_seed_list(const std::string& text);

// Adds the A/A arm (the control under another name) when asked.
void add_aa_arm(Experiment& e);

// Checks what every experiment needs (>= 2 arms, >= 2 seeds, unique names);
// throws ConfigError.
void check_experiment(const Experiment& e);

// The resolved settings of one arm: every key of recipe.lock.toml's settings
// ("section.key" -> value text), train.seed and the run folder excluded.
using ResolvedSettings = std::map<std::string, std::string>;

// Validates every arm (as `ftcore run` would, plugins loaded); refuses arms
// that resolve identically (ConfigError, exit 2). Returns the settings per arm.
std::vector<ResolvedSettings> resolve_arms(const Experiment& e, const std::vector<std::string>& plugin_paths);

}  // namespace ftcore::ab

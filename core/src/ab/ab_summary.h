// An experiment's results as one JSON document (DIR/summary.json): the
// experiment, the keys in which arms differ, provenance, every run's metrics
// and eval-loss curve, and for every metric each arm against the control
// (paired_statistics.h: deltas, BCa bootstrap CI, paired t and Wilcoxon
// p-values, Holm-adjusted across arms, probability of improvement, d_z,
// minimum detectable effect, verdict).
#pragma once

#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "experiment.h"
#include "experiment_runner.h"

namespace ftcore::ab {

// The bootstrap's seed: the same runs always give the same summary.
inline constexpr std::uint64_t kBootstrapSeed = 20211201;
inline constexpr int kBootstrapResamples = 10000;

nlohmann::json build_summary(const Experiment& e, const std::vector<ResolvedSettings>& settings,
                             const ExperimentRuns& runs);

// DIR/experiment.json: what `ftcore ab report DIR` needs to rebuild the report.
void save_experiment(const Experiment& e, const std::vector<ResolvedSettings>& settings);
Experiment load_experiment(const std::filesystem::path& dir, std::vector<ResolvedSettings>& settings);

// Keys whose resolved values differ between arms: key -> value per arm.
std::map<std::string, std::vector<std::string>> arm_differences(const std::vector<ResolvedSettings>& settings);

}  // namespace ftcore::ab

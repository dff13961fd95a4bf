// Runs an experiment's (arm, seed) pairs as child `ftcore run` processes:
//
// - order interleaves arms within each seed (A1 B1 A2 B2 ...), so drift of
//   the machine falls on every arm alike;
// - each run is DIR/runs/<arm>/seed-<k>/, an ordinary run folder, keyed by
//   the hash of its resolved settings (ab_key); a folder with another key is
//   refused (the experiment changed: use another --out);
// - a run with DIR/runs/<arm>/seed-<k>/ab_result.json is finished and never
//   run again; any other is (re)started with resume_from_checkpoint = "auto",
//   so an interrupted one continues from its newest checkpoint;
// - `jobs` runs at once, each with cores / jobs threads (FTCORE_NUM_THREADS),
//   so the machine is never oversubscribed; children die with the runner
//   (PR_SET_PDEATHSIG), so a killed experiment leaves no orphan writers;
// - --stop-hopeless: after each finished run, an arm with >= 3 seeds paired
//   with the control whose bootstrap CI shows it worse than the control by
//   more than the margin gets no further seeds (paired_statistics.h, hopeless()).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "experiment.h"
#include "run_metrics.h"

namespace ftcore::ab {

struct RunRecord {
  std::string arm;
  int64_t seed = 0;
  std::filesystem::path dir;
  RunMetrics metrics;
  bool finished = false;
};

struct ExperimentRuns {
  std::vector<RunRecord> runs;                      // every planned (arm, seed), in run order
  std::map<std::string, int64_t> stopped_hopeless;  // arm -> seeds it had when it was stopped
};

std::filesystem::path run_folder(const Experiment& e, const std::string& arm, int64_t seed);

// Runs what is not finished; throws ConfigError when a run refuses its
// recipe (exit 2) and std::runtime_error when one fails (naming its log).
ExperimentRuns run_experiment(const Experiment& e, const std::vector<ResolvedSettings>& settings);

// The values of `metric` in the control's runs and in `arm`'s, paired by
// seed, over the seeds where both runs finished with that metric.
std::pair<std::vector<double>, std::vector<double>> paired_values(const Experiment& e, const ExperimentRuns& runs,
                                                                  const std::string& arm, const std::string& metric);

// The runs as they stand on disk (for `ftcore ab report`).
ExperimentRuns read_experiment_runs(const Experiment& e);

}  // namespace ftcore::ab

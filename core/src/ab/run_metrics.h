// The numbers one finished run contributes to an experiment, read from its
// metrics.jsonl (and the runner's record of how the process ended):
//
//   final_eval_loss, best_eval_loss, final_perplexity, final_exact_match (generation eval on),
//   eval_loss_auc      area under the eval-loss curve over steps (trapezoids), divided by the
//                      steps it spans: the curve's mean level, comparable across run lengths
//   final_train_loss   the last logged training loss
//   tokens_per_second  mean over the logged training windows
//   peak_rss_mb, optimizer_state_bytes, wall_seconds
//   diverged           1 when the run stopped on a NaN/Inf loss or the loss watchdog, else 0
//
// A metric a run does not have (no validation set, no generation eval) is absent.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace ftcore::ab {

using RunMetrics = std::map<std::string, double>;

RunMetrics read_run_metrics(const std::filesystem::path& run_dir, double wall_seconds, bool diverged);

// The eval-loss curve of a run: (step, loss) in step order, a step logged
// again after a resume keeping its last value.
std::vector<std::pair<double, double>> eval_loss_curve(const std::filesystem::path& run_dir);

// Whether a larger value of `metric` is better (exact_match, tokens_per_second).
bool higher_is_better(const std::string& metric);

// The metric an experiment names, as run_metrics names it: "eval_loss" ->
// "final_eval_loss", "exact_match" -> "final_exact_match", "perplexity" ->
// "final_perplexity", "train_loss" -> "final_train_loss"; others unchanged.
// Throws ConfigError (at `where`) for a name that is none of them.
std::string canonical_metric(const std::string& metric, const std::string& where);

// Every metric name above, in report order.
const std::vector<std::string>& metric_names();

}  // namespace ftcore::ab

// Metrics of one run from its metrics.jsonl (run_metrics.h).
#include "run_metrics.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ftcore/diagnostics.h"

namespace fs = std::filesystem;

namespace ftcore::ab {

namespace {

// phase -> step -> the record (a resumed run's repeated step keeps the last).
std::map<std::string, std::map<int64_t, nlohmann::json>> records_by_step(const fs::path& run_dir) {
  std::map<std::string, std::map<int64_t, nlohmann::json>> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (r.is_discarded() || !r.contains("phase") || !r.contains("step")) continue;  // a line cut by a kill
    auto& slot = out[r["phase"].get<std::string>()][r["step"].get<int64_t>()];
    if (slot.is_null()) slot = nlohmann::json::object();
    for (auto& [k, v] : r.items()) slot[k] = v;
  }
  return out;
}

bool has_number(const nlohmann::json& r, const char* key) { return r.contains(key) && r[key].is_number(); }

}  // namespace

std::vector<std::pair<double, double>> eval_loss_curve(const fs::path& run_dir) {
  std::vector<std::pair<double, double>> curve;
  auto records = records_by_step(run_dir);  // kept alive for the loop (a temporary's member would dangle)
  for (const auto& [step, r] : records["eval"])
    if (has_number(r, "loss")) curve.emplace_back(static_cast<double>(step), r["loss"].get<double>());
  return curve;
}

RunMetrics read_run_metrics(const fs::path& run_dir, double wall_seconds, bool diverged) {
  auto records = records_by_step(run_dir);
  RunMetrics m;
  const auto curve = eval_loss_curve(run_dir);
  if (!curve.empty()) {
    m["final_eval_loss"] = curve.back().second;
    m["best_eval_loss"] = std::min_element(curve.begin(), curve.end(), [](auto& a, auto& b) { return a.second < b.second; })->second;
    if (curve.size() >= 2) {
      double area = 0.0;
      for (size_t i = 1; i < curve.size(); ++i)
        area += (curve[i].first - curve[i - 1].first) * (curve[i].second + curve[i - 1].second) / 2.0;
      m["eval_loss_auc"] = area / (curve.back().first - curve.front().first);
    } else {
      m["eval_loss_auc"] = curve.front().second;
    }
    const nlohmann::json& last = records["eval"].rbegin()->second;
    if (has_number(last, "perplexity")) m["final_perplexity"] = last["perplexity"].get<double>();
    if (has_number(last, "exact_match")) m["final_exact_match"] = last["exact_match"].get<double>();
  }
  double tokens = 0.0, windows = 0.0;
  for (const auto& [step, r] : records["train"]) {
    if (has_number(r, "loss")) m["final_train_loss"] = r["loss"].get<double>();
    if (has_number(r, "tokens_per_second")) tokens += r["tokens_per_second"].get<double>(), windows += 1.0;
    if (has_number(r, "peak_rss_mb")) m["peak_rss_mb"] = std::max(m["peak_rss_mb"], r["peak_rss_mb"].get<double>());
    if (has_number(r, "optimizer_state_bytes")) m["optimizer_state_bytes"] = r["optimizer_state_bytes"].get<double>();
  }
  if (windows > 0) m["tokens_per_second"] = tokens / windows;
  m["wall_seconds"] = wall_seconds;
  m["diverged"] = diverged ? 1.0 : 0.0;
  return m;
}

std::string canonical_metric(const std::string& metric, const std::string& where) {
  static const std::map<std::string, std::string> aliases = {{"eval_loss", "final_eval_loss"},
                                                             {"exact_match", "final_exact_match"},
                                                             {"eval_exact_match", "final_exact_match"},
                                                             {"perplexity", "final_perplexity"},
                                                             {"train_loss", "final_train_loss"}};
  const auto alias = aliases.find(metric);
  const std::string name = alias != aliases.end() ? alias->second : metric;
  const auto& names = metric_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError({{{where, 0, 0}, "unknown metric \"" + metric + "\" (known: eval_loss, exact_match, " + known + ")"}});
  }
  return name;
}

bool higher_is_better(const std::string& metric) {
  return metric.find("exact_match") != std::string::npos || metric == "tokens_per_second";
}

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names = {
      "final_eval_loss", "best_eval_loss", "final_perplexity", "final_exact_match", "eval_loss_auc",
      "final_train_loss", "tokens_per_second", "peak_rss_mb", "optimizer_state_bytes", "wall_seconds", "diverged"};
  return names;
}

}  // namespace ftcore::ab

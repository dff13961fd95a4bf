// The experiment's report, from summary.json alone: DIR/report.md and a
// self-contained DIR/report.html (inline SVG and CSS, nothing fetched):
// eval-loss curves per arm (mean over seeds, min-max band), the paired
// deltas per seed of the primary metric with their 95% CI, the table of
// metrics and verdicts, the keys in which arms differ, and provenance.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace ftcore::ab {

void write_reports(const std::filesystem::path& dir, const nlohmann::json& summary);

}  // namespace ftcore::ab

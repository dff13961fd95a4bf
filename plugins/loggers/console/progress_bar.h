// The console logger's progress bar as pure functions of its state, so the
// exact text is tested without a terminal (tests/unit/console_logger_test.cpp):
//
//   step 185/500 [#######-------------] 37% 01:23<02:21 | loss 1.8342 | lr 2.0000e-04 | 1234 tok/s | peak_rss 512 MB
//
// The console logger prints it after '\r' to redraw one line in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ftcore::console {

// The name of a value that sets the bar's total instead of being shown: the
// trainer sends it once (at step 0, or at the step a resumed run starts from).
inline constexpr const char* kTotalStepsKey = "total_steps";

struct ProgressState {
  int64_t step = 0;
  int64_t total_steps = 0;     // 0: unknown (no bar, percentage or ETA)
  int64_t start_step = 0;      // the step timing began at (a resumed run begins late)
  double elapsed_seconds = 0;  // wall time since start_step
  std::vector<std::pair<std::string, double>> values;  // the latest train record's
};

// A metric as the plain lines print it: `precision` digits after the point,
// scientific for magnitudes below 1e-3 (learning rates) other than zero.
std::string format_number(double value, int precision);

// "MM:SS" below an hour, "H:MM:SS" from there (whole seconds, rounded down);
// "?" when negative, not finite or beyond 1e9 s.
std::string format_duration(double seconds);

// Seconds left at the average rate since start_step; -1 when it cannot be
// known yet (no step done since timing began, or no total).
double estimate_remaining_seconds(const ProgressState& state);

// The bar line, without the leading '\r'. Values are shown in record order:
// tokens_per_second as "N tok/s", names ending in "_mb" as "<name> N MB",
// others as "<name> <format_number>"; total_steps is not shown. A line longer
// than `width - 1` columns is cut there so the terminal never wraps it (a
// wrapped line cannot be redrawn with '\r'); width 0 means no limit.
std::string format_progress_line(const ProgressState& state, int precision, size_t width);

}  // namespace ftcore::console

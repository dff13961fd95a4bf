// Formatting of the console progress bar (see progress_bar.h). Pure: no
// clock, no terminal, so every string is testable by hand.
#include "progress_bar.h"

#include <cmath>
#include <cstdio>
#include <string_view>

namespace ftcore::console {
namespace {

constexpr int kBarCells = 20;

std::string printf_string(const char* format, double value, int precision) {
  const int n = std::snprintf(nullptr, 0, format, precision, value);
  std::string out(static_cast<size_t>(n > 0 ? n : 0), '\0');
  std::snprintf(out.data(), out.size() + 1, format, precision, value);
  return out;
}

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string format_value(const std::string& name, double value, int precision) {
  if (name == "tokens_per_second") return printf_string("%.*f", value, 0) + " tok/s";
  if (ends_with(name, "_mb") && name.size() > 3)
    return name.substr(0, name.size() - 3) + " " + printf_string("%.*f", value, 0) + " MB";
  return name + " " + format_number(value, precision);
}

// Cuts at `limit` bytes, backing off to a UTF-8 character boundary.
std::string cut_to(std::string line, size_t limit) {
  if (line.size() <= limit) return line;
  size_t end = limit;
  while (end > 0 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;
  line.resize(end);
  return line;
}

}  // namespace

std::string format_number(double value, int precision) {
  const bool tiny = value != 0.0 && value < 1e-3 && value > -1e-3;
  return printf_string(tiny ? "%.*e" : "%.*f", value, precision);
}

std::string format_duration(double seconds) {
  // Past ~30 years an estimate says nothing (and would overflow the cast).
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) return "?";
  const auto total = static_cast<long long>(seconds);  // whole seconds, rounded down
  const long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  char buffer[48];
  if (h > 0) std::snprintf(buffer, sizeof(buffer), "%lld:%02lld:%02lld", h, m, s);
  else std::snprintf(buffer, sizeof(buffer), "%02lld:%02lld", m, s);
  return buffer;
}

double estimate_remaining_seconds(const ProgressState& state) {
  if (state.total_steps <= 0) return -1;
  if (state.step >= state.total_steps) return 0;
  const int64_t done = state.step - state.start_step;
  if (done <= 0) return -1;
  return state.elapsed_seconds / static_cast<double>(done) * static_cast<double>(state.total_steps - state.step);
}

std::string format_progress_line(const ProgressState& state, int precision, size_t width) {
  // Appended piece by piece: `"literal" + std::to_string(...)` trips a GCC 12
  // -Wstringop-overflow false positive.
  std::string line = "step ";
  line += std::to_string(state.step);
  if (state.total_steps > 0) {
    const int64_t total = state.total_steps;
    const int64_t clamped = state.step < 0 ? 0 : (state.step > total ? total : state.step);
    const auto filled = static_cast<int>(clamped * kBarCells / total);
    line += '/';
    line += std::to_string(total);
    line += " [";
    line.append(filled, '#').append(kBarCells - filled, '-');
    line += "] ";
    line += std::to_string(clamped * 100 / total);
    line += "% ";
    line += format_duration(state.elapsed_seconds);
    line += '<';
    line += format_duration(estimate_remaining_seconds(state));
  } else {
    line += ' ';
    line += format_duration(state.elapsed_seconds);
  }
  for (const auto& [name, value] : state.values) {
    if (name == kTotalStepsKey) continue;
    line += " | " + format_value(name, value, precision);
  }
  return width == 0 ? line : cut_to(std::move(line), width - 1);
}

}  // namespace ftcore::console

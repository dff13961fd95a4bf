// logger/console: metrics on stdout, as a progress bar on a terminal and as
// plain lines otherwise.
//
// Plain lines (stdout not a terminal, or progress_bar = "off"), one per record:
//   step 20/500 | train | loss 1.8342 | lr 2.0000e-04 | grad_norm 0.9120
// ("/500" once a record has carried total_steps; the value itself is not
// printed). Texts print as "step N | tag" followed by the text.
//
// Progress bar (stdout a terminal, or progress_bar = "on"): train records
// redraw one line in place with '\r' (progress_bar.h has its format); eval
// records and texts print as plain lines above it: the bar line is erased
// (ESC[K), the line printed, the bar drawn again below. Elapsed time and ETA
// are measured from the first record this process sees, so a resumed run's
// rate counts only the steps it has done.
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "progress_bar.h"

namespace {

using namespace ftcore;
using Clock = std::chrono::steady_clock;

// Columns of the terminal on stdout; COLUMNS, then 80, when it has none.
size_t terminal_width() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    const long n = std::strtol(columns, nullptr, 10);
    if (n > 0) return static_cast<size_t>(n);
  }
  return 80;
}

class ConsoleLogger : public sdk::Logger {
 public:
  ConsoleLogger(int precision, bool progress_bar) : precision_(precision), bar_enabled_(progress_bar) {}

  void open(const sdk::RunInfo& run) override {
    std::printf("run %s -> %s\n", run.run_name.c_str(), run.output_dir.c_str());
    std::fflush(stdout);
  }

  void log_metrics(const sdk::MetricRecord& record) override {
    for (const auto& [key, value] : record.values)
      if (key == console::kTotalStepsKey && value > 0) state_.total_steps = static_cast<int64_t>(value);
    if (!start_) {
      start_ = Clock::now();
      state_.start_step = record.step;
    }
    if (bar_enabled_ && record.phase == "train") {
      state_.step = record.step;
      state_.values = record.values;
      bar_drawn_ = true;
      draw_bar();
    } else {
      print_above_bar(plain_line(record) + "\n");
    }
    std::fflush(stdout);  // lines appear as they happen when stdout is a file or a pipe (tee)
  }

  void log_text(int64_t step, const std::string& tag, const std::string& text) override {
    print_above_bar("step " + std::to_string(step) + " | " + tag + "\n" + text + "\n");
    std::fflush(stdout);
  }

  void flush() override { std::fflush(stdout); }

  void close() override {
    if (bar_drawn_) std::fputs("\n", stdout);  // leave the last bar on screen, cursor below it
    bar_drawn_ = false;
    flush();
  }

 private:
  std::string plain_line(const sdk::MetricRecord& record) const {
    std::string line = "step ";  // appended: see progress_bar.cpp on GCC 12
    line += std::to_string(record.step);
    if (state_.total_steps > 0) {
      line += '/';
      line += std::to_string(state_.total_steps);
    }
    line += " | " + record.phase;
    for (const auto& [key, value] : record.values) {
      if (key == console::kTotalStepsKey) continue;
      line += " | " + key + " " + console::format_number(value, precision_);
    }
    return line;
  }

  void draw_bar() {
    state_.elapsed_seconds = std::chrono::duration<double>(Clock::now() - *start_).count();
    const std::string line = console::format_progress_line(state_, precision_, terminal_width());
    std::fputs(("\r" + line + "\033[K").c_str(), stdout);  // ESC[K clears what a longer bar left
    std::fflush(stdout);  // no newline: a line-buffered stdout would hold it back
  }

  void print_above_bar(const std::string& text) {
    if (bar_drawn_) std::fputs("\r\033[K", stdout);
    std::fputs(text.c_str(), stdout);
    if (bar_drawn_) draw_bar();
  }

  int precision_;
  bool bar_enabled_;
  console::ProgressState state_;
  std::optional<Clock::time_point> start_;
  bool bar_drawn_ = false;
};

void register_console(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  spec.add_int("precision", 4).with_range(0, 12).with_doc("Digits after the decimal point.");
  spec.add_enum("progress_bar", {"auto", "on", "off"}, "auto")
      .with_doc("A progress bar redrawn in place (auto: when stdout is a terminal; off: plain lines).");
  registry.add_logger({"console", "Progress bar on a terminal, plain metric lines otherwise", std::move(spec)},
                      [](const sdk::Options& options) -> std::unique_ptr<sdk::Logger> {
                        const std::string& mode = options.get_string("progress_bar");
                        const bool bar = mode == "on" || (mode == "auto" && ::isatty(STDOUT_FILENO) == 1);
                        return std::make_unique<ConsoleLogger>(static_cast<int>(options.get_int("precision")), bar);
                      });
}

}  // namespace

FTCORE_PLUGIN("console", "1.0.0", "Apache-2.0", register_console)

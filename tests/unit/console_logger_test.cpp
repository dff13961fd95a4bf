// Tests of logger/console (plugins/loggers/console): the progress bar's
// formatting functions against strings derived by hand, and the plugin's
// output on a non-terminal stdout (plain lines, exactly as before the bar
// existed) and with the bar forced on.
#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <string>

#include "../../plugins/loggers/console/progress_bar.h"
#include "ftcore/sdk/logger.h"
#include "test_support.h"

namespace ftcore {
namespace {

using console::format_duration;
using console::format_number;
using console::format_progress_line;
using console::ProgressState;

TEST(ConsoleProgressBar, FormatsNumbersAsThePlainLinesDo) {
  EXPECT_EQ(format_number(1.8342, 4), "1.8342");
  EXPECT_EQ(format_number(2e-4, 4), "2.0000e-04");
  EXPECT_EQ(format_number(-5e-4, 2), "-5.00e-04");
  EXPECT_EQ(format_number(1e-3, 4), "0.0010");  // 1e-3 itself is not "tiny"
  EXPECT_EQ(format_number(0.0, 4), "0.0000");
  EXPECT_EQ(format_number(12.5, 0), "12");      // printf rounds half to even
  EXPECT_EQ(format_number(1e20, 1), "100000000000000000000.0");  // never cut short
}

TEST(ConsoleProgressBar, FormatsDurations) {
  EXPECT_EQ(format_duration(0), "00:00");
  EXPECT_EQ(format_duration(83.9), "01:23");    // rounded down
  EXPECT_EQ(format_duration(3599.99), "59:59");
  EXPECT_EQ(format_duration(3600), "1:00:00");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(360000), "100:00:00");
  EXPECT_EQ(format_duration(-1), "?");
  EXPECT_EQ(format_duration(std::nan("")), "?");
  EXPECT_EQ(format_duration(std::numeric_limits<double>::infinity()), "?");
  EXPECT_EQ(format_duration(2e9), "?");
}

// 185 of 500 steps in 83.5 s: 20 * 185 / 500 = 7.4 -> 7 cells, 37%,
// ETA 83.5 / 185 * 315 = 142.2 s -> 02:22.
TEST(ConsoleProgressBar, FullLine) {
  ProgressState s;
  s.step = 185;
  s.total_steps = 500;
  s.elapsed_seconds = 83.5;
  s.values = {{"total_steps", 500}, {"loss", 1.8342}, {"lr", 2e-4}, {"tokens_per_second", 1234.4},
              {"peak_rss_mb", 512.25}, {"epoch", 0.37}};
  EXPECT_EQ(format_progress_line(s, 4, 0),
            "step 185/500 [#######-------------] 37% 01:23<02:22 | loss 1.8342 | lr 2.0000e-04 | 1234 tok/s"
            " | peak_rss 512 MB | epoch 0.3700");
  // 40 columns: cut to 39 so the terminal never wraps the line.
  EXPECT_EQ(format_progress_line(s, 4, 40), "step 185/500 [#######-------------] 37%");
  EXPECT_EQ(console::estimate_remaining_seconds(s), 83.5 / 185 * 315);
}

TEST(ConsoleProgressBar, StartEndAndUnknownTotal) {
  ProgressState start;
  start.total_steps = 500;
  EXPECT_EQ(format_progress_line(start, 4, 0), "step 0/500 [--------------------] 0% 00:00<?");

  ProgressState done;
  done.step = 500;
  done.total_steps = 500;
  done.elapsed_seconds = 3725;
  EXPECT_EQ(format_progress_line(done, 4, 0), "step 500/500 [####################] 100% 1:02:05<00:00");

  ProgressState past = done;  // a total that was too small: the bar stays full
  past.step = 510;
  EXPECT_EQ(format_progress_line(past, 4, 0), "step 510/500 [####################] 100% 1:02:05<00:00");

  ProgressState unknown;
  unknown.step = 7;
  unknown.elapsed_seconds = 5.2;
  unknown.values = {{"loss", 2.5}};
  EXPECT_EQ(format_progress_line(unknown, 4, 0), "step 7 00:05 | loss 2.5000");
}

// Resumed at step 400: 50 steps in 100 s, 50 to go -> 100 s.
// 20 * 450 / 500 = 18 cells, 90%.
TEST(ConsoleProgressBar, EtaCountsOnlyTheStepsThisProcessDid) {
  ProgressState s;
  s.step = 450;
  s.total_steps = 500;
  s.start_step = 400;
  s.elapsed_seconds = 100;
  EXPECT_EQ(format_progress_line(s, 4, 0), "step 450/500 [##################--] 90% 01:40<01:40");
}

TEST(ConsoleProgressBar, CutsAtACharacterBoundary) {
  ProgressState s;
  s.step = 1;
  s.values = {{"\xc3\xa9", 1.0}};  // "é": two bytes at offsets 15 and 16
  EXPECT_EQ(format_progress_line(s, 1, 0), "step 1 00:00 | \xc3\xa9 1.0");
  EXPECT_EQ(format_progress_line(s, 1, 17), "step 1 00:00 | ");  // 16 bytes would split the é
  EXPECT_EQ(format_progress_line(s, 1, 18), "step 1 00:00 | \xc3\xa9");
}

// Redirects fd 1 to a file for the object's lifetime; text() returns what was written.
class CapturedStdout {
 public:
  explicit CapturedStdout(std::filesystem::path path) : path_(std::move(path)) {
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDOUT_FILENO);
    ::close(fd);
  }
  ~CapturedStdout() { restore(); }
  std::string text() {
    restore();
    std::ifstream in(path_, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
    saved_ = -1;
  }
  std::filesystem::path path_;
  int saved_ = -1;
};

std::string run_console(const std::map<std::string, sdk::ParamValue>& options, bool with_total) {
  testing::TempDir dir;
  CapturedStdout captured(dir / "stdout.txt");
  const RegistryEntry& entry = testing::in_tree_entry(sdk::ComponentKind::Logger, "console");
  auto logger = testing::in_tree_registry().create_logger(entry, testing::options_for(entry, options));
  logger->open({"r", "/runs/r", {}});
  if (with_total) logger->log_metrics({0, "train", 1.0, {{"total_steps", 30}}});
  logger->log_metrics({10, "train", 2.0, {{"loss", 2.5}, {"lr", 2e-4}}});
  logger->log_metrics({10, "eval", 3.0, {{"loss", 2.25}}});
  logger->log_text(10, "sample", "hi");
  logger->close();
  return captured.text();
}

// What the console logger printed before it had a progress bar.
constexpr const char* kPlainLines =
    "run r -> /runs/r\n"
    "step 10 | train | loss 2.5000 | lr 2.0000e-04\n"
    "step 10 | eval | loss 2.2500\n"
    "step 10 | sample\nhi\n";

TEST(ConsoleLogger, PlainLinesWhenOffOrNotATerminal) {
  EXPECT_EQ(run_console({{"progress_bar", std::string("off")}}, false), kPlainLines);
  EXPECT_EQ(run_console({}, false), kPlainLines);  // auto, and stdout is a file
  EXPECT_EQ(run_console({{"precision", int64_t{2}}}, false),
            "run r -> /runs/r\nstep 10 | train | loss 2.50 | lr 2.00e-04\nstep 10 | eval | loss 2.25\n"
            "step 10 | sample\nhi\n");
}

TEST(ConsoleLogger, PlainLinesShowTheTotalOnceKnown) {
  EXPECT_EQ(run_console({}, true),
            "run r -> /runs/r\n"
            "step 0/30 | train\n"
            "step 10/30 | train | loss 2.5000 | lr 2.0000e-04\n"
            "step 10/30 | eval | loss 2.2500\n"
            "step 10 | sample\nhi\n");
}

// Forced on: train records redraw one line; eval and text lines erase it,
// print above it, and it is drawn again; close ends the line.
TEST(ConsoleLogger, BarRedrawsInPlaceWithEvalLinesAbove) {
  const std::string out = run_console({{"progress_bar", std::string("on")}}, true);
  const std::string bar0 = R"(\rstep 0/30 \[-{20}\] 0% 00:00<\?\x1b\[K)";
  const std::string bar10 = R"(\rstep 10/30 \[#{6}-{14}\] 33% \d\d:\d\d<\d\d:\d\d \| loss 2\.5000 \| lr 2\.0000e-04\x1b\[K)";
  const std::string erase = R"(\r\x1b\[K)";
  const std::regex expected("run r -> /runs/r\n" + bar0 + bar10 + erase + "step 10/30 \\| eval \\| loss 2\\.2500\n" +
                            bar10 + erase + "step 10 \\| sample\nhi\n" + bar10 + "\n");
  EXPECT_TRUE(std::regex_match(out, expected)) << out;
}

}  // namespace
}  // namespace ftcore

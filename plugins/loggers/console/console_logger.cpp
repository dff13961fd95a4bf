// logger/console: one plain line per metrics record on stdout, e.g.
//   step 20/500 | train | loss 1.8342 | lr 2.0e-04 | grad_norm 0.912
// (the progress bar for terminals comes with the trainer).
#include <cinttypes>
#include <cstdio>
#include <string>

#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

using namespace ftcore;

class ConsoleLogger : public sdk::Logger {
 public:
  explicit ConsoleLogger(int precision) : precision_(precision) {}

  void open(const sdk::RunInfo& run) override {
    std::printf("run %s -> %s\n", run.run_name.c_str(), run.output_dir.c_str());
    std::fflush(stdout);
  }

  void log_metrics(const sdk::MetricRecord& record) override {
    std::string line = "step " + std::to_string(record.step) + " | " + record.phase;
    char buffer[64];
    for (const auto& [key, value] : record.values) {
      // Learning rates and other tiny numbers read best in scientific notation.
      const bool tiny = value != 0.0 && (value < 1e-3 && value > -1e-3);
      std::snprintf(buffer, sizeof(buffer), tiny ? "%.*e" : "%.*f", precision_, value);
      line += " | " + key + " " + buffer;
    }
    std::printf("%s\n", line.c_str());
  }

  void log_text(int64_t step, const std::string& tag, const std::string& text) override {
    std::printf("step %" PRId64 " | %s\n%s\n", step, tag.c_str(), text.c_str());
  }

  void flush() override { std::fflush(stdout); }
  void close() override { flush(); }

 private:
  int precision_;
};

void register_console(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  spec.add_int("precision", 4).with_range(0, 12).with_doc("Digits after the decimal point.");
  registry.add_logger({"console", "Plain metric lines on stdout", std::move(spec)},
                      [](const sdk::Options& options) -> std::unique_ptr<sdk::Logger> {
                        return std::make_unique<ConsoleLogger>(static_cast<int>(options.get_int("precision")));
                      });
}

}  // namespace

FTCORE_PLUGIN("console", "1.0.0", "Apache-2.0", register_console)

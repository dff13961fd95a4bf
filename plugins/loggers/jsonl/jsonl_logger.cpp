// logger/jsonl: one JSON object per line in <run folder>/metrics.jsonl:
//   {"step": 20, "phase": "train", "time": 1764470000.12, "loss": 1.83, "lr": 0.0002}
//   {"step": 40, "phase": "text", "tag": "sample", "text": "..."}
// Lines are written whole (buffered, flushed on flush/close), so a crash
// loses at most the unflushed tail, never half a line past a flush.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

using namespace ftcore;

class JsonlLogger : public sdk::Logger {
 public:
  explicit JsonlLogger(std::string file_name) : file_name_(std::move(file_name)) {}

  void open(const sdk::RunInfo& run) override {
    std::filesystem::path path = std::filesystem::path(run.output_dir) / file_name_;
    out_.open(path, std::ios::app);
    if (!out_) throw std::runtime_error("jsonl logger cannot open " + path.string());
    nlohmann::json meta = {{"phase", "run"}, {"run_name", run.run_name}, {"metadata", run.metadata}};
    out_ << meta.dump() << "\n";
  }

  void log_metrics(const sdk::MetricRecord& record) override {
    nlohmann::ordered_json j = {{"step", record.step}, {"phase", record.phase}, {"time", record.wall_time}};
    for (const auto& [key, value] : record.values) {
      if (std::isfinite(value)) j[key] = value;
      else j[key] = std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");  // JSON has no NaN
    }
    out_ << j.dump() << "\n";
  }

  void log_text(int64_t step, const std::string& tag, const std::string& text) override {
    nlohmann::ordered_json j = {{"step", step}, {"phase", "text"}, {"tag", tag}, {"text", text}};
    out_ << j.dump() << "\n";
  }

  void flush() override { out_.flush(); }
  void close() override {
    if (out_.is_open()) out_.close();
  }

 private:
  std::string file_name_;
  std::ofstream out_;
};

void register_jsonl(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  spec.add_string("file", "metrics.jsonl").with_doc("File name inside the run folder.");
  registry.add_logger({"jsonl", "One JSON object per event in the run folder (metrics.jsonl)", std::move(spec)},
                      [](const sdk::Options& options) -> std::unique_ptr<sdk::Logger> {
                        return std::make_unique<JsonlLogger>(options.get_string("file"));
                      });
}

}  // namespace

FTCORE_PLUGIN("jsonl", "1.0.0", "Apache-2.0", register_jsonl)

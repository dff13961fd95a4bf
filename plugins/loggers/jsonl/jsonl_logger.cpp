// logger/jsonl: one JSON object per line in <run folder>/metrics.jsonl:
//   {"step": 20, "phase": "train", "time": 1764470000.12, "loss": 1.83, "lr": 0.0002}
//   {"step": 40, "phase": "text", "tag": "sample", "text": "..."}
// Each line goes to the file in one write(2) as it is logged: once written it
// is in the kernel, so a SIGKILL or an OOM kill loses at most the line being
// written, and a reader (tail -f, ftcore ab) sees every step. flush() (at
// each checkpoint and at the end) fsyncs, for power loss. A resumed run
// trims the file to its checkpoint's step first (ftcore/sdk/logger_history.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/logger_history.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

using namespace ftcore;

// A resumed run keeps the lines of steps up to its checkpoint's, and the
// lines without a step (the "run" lines of earlier starts).
bool keep_line(const std::string& line, int64_t resumed_at_step) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  const auto step = j.find("step");
  return step == j.end() || !step->is_number_integer() || step->get<int64_t>() <= resumed_at_step;
}

class JsonlLogger : public sdk::Logger {
 public:
  explicit JsonlLogger(std::string file_name) : file_name_(std::move(file_name)) {}
  ~JsonlLogger() override { close(); }

  void open(const sdk::RunInfo& run) override {
    path_ = std::filesystem::path(run.output_dir) / file_name_;
    sdk::trim_history(path_, run, false, keep_line);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd_ < 0) throw std::runtime_error("jsonl logger cannot open " + path_.string() + ": " + std::strerror(errno));
    nlohmann::json meta = {{"phase", "run"}, {"run_name", run.run_name}, {"metadata", run.metadata}};
    write_line(meta.dump());
  }

  void log_metrics(const sdk::MetricRecord& record) override {
    nlohmann::ordered_json j = {{"step", record.step}, {"phase", record.phase}, {"time", record.wall_time}};
    for (const auto& [key, value] : record.values) {
      if (std::isfinite(value)) j[key] = value;
      else j[key] = std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");  // JSON has no NaN
    }
    write_line(j.dump());
  }

  void log_text(int64_t step, const std::string& tag, const std::string& text) override {
    nlohmann::ordered_json j = {{"step", step}, {"phase", "text"}, {"tag", tag}, {"text", text}};
    write_line(j.dump());
  }

  void flush() override {
    if (fd_ >= 0 && ::fsync(fd_) != 0 && errno != EINVAL) report("cannot sync");
  }
  void close() override {
    if (fd_ < 0) return;
    flush();
    ::close(fd_);
    fd_ = -1;
  }

 private:
  // One write(2) per line (O_APPEND): never half a line from us between two whole ones.
  void write_line(std::string line) {
    if (fd_ < 0) return;
    line += '\n';
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return report("cannot write");
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

  // Once, on stderr: a metrics file must not stop a training run.
  void report(const char* what) {
    if (reported_) return;
    reported_ = true;
    std::fprintf(stderr, "warning: jsonl logger: %s %s: %s (further errors not shown)\n", what, path_.c_str(),
                 std::strerror(errno));
  }

  std::string file_name_;
  std::filesystem::path path_;
  int fd_ = -1;
  bool reported_ = false;
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

// The logger contract: receives run metadata once, then metrics (step, loss,
// lr, grad_norm, tokens/s, memory, eval results), text samples, and flushes
// on checkpoint and on exit. Loggers must not throw from flush()/close() for
// transient I/O problems they can report instead; they may throw from open().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ftcore::sdk {

struct RunInfo {
  std::string run_name;
  std::string output_dir;                      // the run folder, created by the core
  std::map<std::string, std::string> metadata; // recipe hash, plugin versions, ...
};

// Where the history goes on. metadata[kResumedAtStep] = "N": the run resumed
// from a checkpoint of step N, and will log steps N+1... again, so a logger
// appending to a file keeps its records of steps <= N and drops the rest
// (a killed run's records past its last checkpoint). Absent: a fresh start;
// such a logger starts its file empty (a run folder reused with --overwrite,
// or a rerun of a run killed before its first checkpoint).
inline constexpr const char* kResumedAtStep = "resumed_at_step";

struct MetricRecord {
  int64_t step = 0;
  std::string phase = "train";  // "train" or "eval"
  double wall_time = 0.0;       // seconds since the Unix epoch
  std::vector<std::pair<std::string, double>> values;  // in a stable order
};

class Logger {
 public:
  virtual ~Logger() = default;
  virtual void open(const RunInfo& run) = 0;
  virtual void log_metrics(const MetricRecord& record) = 0;
  virtual void log_text(int64_t step, const std::string& tag, const std::string& text) = 0;
  virtual void flush() = 0;
  virtual void close() = 0;
};

}  // namespace ftcore::sdk

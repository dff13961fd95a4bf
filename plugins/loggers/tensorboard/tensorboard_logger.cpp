// logger/tensorboard: TensorBoard event files written natively (no
// TensorFlow, no protobuf library): <run folder>/<log_dir>/
// events.out.tfevents.<unix time>.<hostname>, one per process.
//
//   - every metrics record is one Event whose scalars are tagged
//     "<phase>/<metric>" ("train/loss", "eval/loss"), rounded to float32;
//   - log_text is a text-plugin summary under its own tag;
//   - at the first record, a SessionLog START at that step, then the run's
//     name and metadata as a Markdown table under "run/metadata" at that
//     step. START makes TensorBoard drop what an earlier, killed process
//     logged at or past the step this one resumed from, so a resumed run's
//     curves have no doubled tail. (Written at the first record, not at
//     open(), because only then is the starting step known.)
//
// Each record reaches the file as it is logged (flushed to the kernel: a
// killed run loses at most the record being written); the file stays open. I/O errors
// are reported once on stderr and never thrown after open(): losing a curve
// must not stop a training run.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "tf_event.h"
#include "tfrecord_writer.h"

namespace ftcore::tensorboard {
namespace {

namespace fs = std::filesystem;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// Creates events.out.tfevents.<seconds>.<host>, adding .1, .2, ... when a
// process of the same second already has that name. Readers take any file
// whose name contains "tfevents" and read them in name order.
std::unique_ptr<TfRecordWriter> create_event_file(const fs::path& dir) {
  const std::string base = "events.out.tfevents." +
                           std::to_string(static_cast<long long>(now_seconds())) + "." + host_name();
  for (int suffix = 0;; ++suffix) {
    const fs::path path = dir / (suffix == 0 ? base : base + "." + std::to_string(suffix));
    if (fs::exists(path)) continue;
    return std::make_unique<TfRecordWriter>(path);
  }
}

// | key | value | rows; '|' is escaped and line breaks become spaces so a
// value stays in its cell.
std::string markdown_table(const sdk::RunInfo& run) {
  auto cell = [](const std::string& text) {
    std::string out;
    for (char c : text) {
      if (c == '|') out += "\\|";
      else if (c == '\n' || c == '\r') out += ' ';
      else out += c;
    }
    return out;
  };
  std::string table = "| key | value |\n|---|---|\n| run_name | " + cell(run.run_name) + " |\n";
  for (const auto& [key, value] : run.metadata) table += "| " + cell(key) + " | " + cell(value) + " |\n";
  return table;
}

class TensorboardLogger : public sdk::Logger {
 public:
  TensorboardLogger(std::string log_dir, bool run_metadata)
      : log_dir_(std::move(log_dir)), run_metadata_(run_metadata) {}

  void open(const sdk::RunInfo& run) override {
    const fs::path dir = fs::path(run.output_dir) / log_dir_;
    fs::create_directories(dir);
    writer_ = create_event_file(dir);
    metadata_text_ = markdown_table(run);
    write(encode_file_version_event(now_seconds()));
    flush();
  }

  void log_metrics(const sdk::MetricRecord& record) override {
    if (!writer_) return;
    begin_session(record.step);
    if (record.values.empty()) return;
    std::vector<std::pair<std::string, double>> tagged;
    tagged.reserve(record.values.size());
    for (const auto& [name, value] : record.values) tagged.emplace_back(record.phase + "/" + name, value);
    write(encode_scalars_event(record.wall_time, record.step, tagged));
    flush();
  }

  void log_text(int64_t step, const std::string& tag, const std::string& text) override {
    if (!writer_) return;
    begin_session(step);
    write(encode_text_event(now_seconds(), step, tag, text));
    flush();
  }

  void flush() override {
    if (writer_ && !writer_->flush()) report();
  }

  void close() override {
    if (!writer_) return;
    // A run that logged nothing still records what it was.
    if (!session_started_ && run_metadata_) write(encode_text_event(now_seconds(), 0, "run/metadata", metadata_text_));
    if (!writer_->close()) report();
    writer_.reset();
  }

  ~TensorboardLogger() override { close(); }

 private:
  void begin_session(int64_t step) {
    if (session_started_) return;
    session_started_ = true;
    const double t = now_seconds();
    write(encode_session_start_event(t, step));
    if (run_metadata_) write(encode_text_event(t, step, "run/metadata", metadata_text_));
  }

  void write(const std::string& event) {
    if (!writer_->write(event)) report();
  }

  void report() {
    if (reported_) return;  // once: a full disk would otherwise print at every step
    reported_ = true;
    std::fprintf(stderr, "warning: tensorboard logger: %s (further errors not shown)\n", writer_->error().c_str());
  }

  std::string log_dir_;
  bool run_metadata_;
  std::unique_ptr<TfRecordWriter> writer_;
  std::string metadata_text_;
  bool session_started_ = false;
  bool reported_ = false;
};

void register_tensorboard(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  spec.add_string("log_dir", "")
      .with_doc("Folder for the event file, relative to the run folder (\"\": the run folder itself).");
  spec.add_bool("run_metadata", true)
      .with_doc("Write the run name and metadata as a text summary (tag run/metadata) at the first step.");
  registry.add_logger({"tensorboard", "TensorBoard event files (scalars <phase>/<metric>, text)", std::move(spec)},
                      [](const sdk::Options& options) -> std::unique_ptr<sdk::Logger> {
                        return std::make_unique<TensorboardLogger>(options.get_string("log_dir"),
                                                                   options.get_bool("run_metadata"));
                      });
}

}  // namespace
}  // namespace ftcore::tensorboard

FTCORE_PLUGIN("tensorboard", "1.0.0", "Apache-2.0", ftcore::tensorboard::register_tensorboard)

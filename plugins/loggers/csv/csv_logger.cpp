// logger/csv: metrics as CSV in the run folder, in long ("tidy") form, one
// row per metric value:
//
//   step,phase,time,name,value
//   20,train,1764470000.125,loss,1.8342
//   20,train,1764470000.125,lr,0.0002
//   40,eval,1764470031.5,loss,1.7901
//
// Rows reach the file as they are logged (flushed row by row; fsync at
// checkpoints); a resumed run first trims both files to its checkpoint's
// step, a fresh start empties them (ftcore/sdk/logger_history.h).
//
// Why long and not a column per metric: train and eval records carry
// different names, and a name may first appear late (a memory figure, an
// eval metric), so a header fixed at the first row cannot hold them all, and
// rewriting the file when one appears would break appending on resume and
// leave a half-rewritten file after a kill. Long rows are final the moment
// they are written, a resumed run appends to the same file, and any reader
// pivots them back to wide form:
//   pandas:  pd.read_csv(p).pivot_table(index=["step", "phase"], columns="name", values="value")
//   stdlib:  csv.DictReader(open(p, newline=""))
//
// Values are written in the shortest form that reads back to the same double
// (std::to_chars), so nothing is lost; non-finite ones as nan, inf, -inf,
// which float() and pandas parse. Fields are quoted as RFC 4180 and Python's
// csv module do: only when they hold a comma, a double quote or a line
// break, with quotes doubled.
//
// Texts (log_text) are not metrics: they go to a second file, text_file
// (default "text.csv": step,time,tag,text; multi-line texts stay one quoted
// field), or nowhere when text_file is "". Run metadata is not written here:
// recipe.lock.toml holds it.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/logger_history.h"
#include "ftcore/sdk/option_error.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

using namespace ftcore;
namespace fs = std::filesystem;

constexpr const char* kMetricsHeader = "step,phase,time,name,value";
constexpr const char* kTextHeader = "step,time,tag,text";

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string format_double(double value) {
  if (std::isnan(value)) return "nan";  // never "-nan": one spelling for readers
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return ec == std::errc() ? std::string(buffer, end) : "nan";
}

// One CSV file with a fixed header, appended to: a resumed run continues the
// file its first process wrote. A file with a different header is refused
// rather than mixed with rows it cannot describe.
class CsvFile {
 public:
  CsvFile(const fs::path& path, const std::string& header, const sdk::RunInfo& run) : path_(path) {
    // Another program's file is refused before anything of it is trimmed.
    std::error_code ec;
    if (fs::exists(path, ec) && fs::file_size(path, ec) > 0) {
      std::ifstream in(path);
      std::string first;
      std::getline(in, first);
      if (first != header)
        throw std::runtime_error("csv logger: " + path.string() + " exists with header \"" + first +
                                 "\", expected \"" + header + "\"; choose another file name");
    }
    // A resumed run keeps the header and the rows of steps up to its checkpoint's.
    sdk::trim_history(path, run, true, [&](const std::string& row, int64_t resumed_at_step) {
      if (row == header + "\n") return true;
      const char* field_end = row.data() + std::min(row.find(','), row.size());
      int64_t step = 0;
      const auto [end, error] = std::from_chars(row.data(), field_end, step);
      return error == std::errc() && end == field_end && step <= resumed_at_step;
    });
    const bool has_content = fs::exists(path, ec) && fs::file_size(path, ec) > 0;
    file_ = std::fopen(path.c_str(), "ab");
    if (!file_) throw std::runtime_error("csv logger cannot open " + path.string() + ": " + std::strerror(errno));
    if (!has_content) write_line(header);
  }
  ~CsvFile() { close(); }
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;

  // Flushed row by row: a killed run loses at most the row being written.
  void write_line(const std::string& line) {
    if (file_ && std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fputc('\n', file_) != EOF &&
        std::fflush(file_) == 0)
      return;
    report("cannot write");
  }
  // At checkpoints and the end: to the disk, for power loss.
  void flush() {
    if (file_ && (std::fflush(file_) != 0 || (::fsync(::fileno(file_)) != 0 && errno != EINVAL))) report("cannot flush");
  }
  void close() {
    if (!file_) return;
    if (std::fclose(file_) != 0) report("cannot close");
    file_ = nullptr;
  }

 private:
  // Once, on stderr: a metrics file must not stop a training run.
  void report(const char* what) {
    if (reported_) return;
    reported_ = true;
    std::fprintf(stderr, "warning: csv logger: %s %s: %s (further errors not shown)\n", what, path_.c_str(),
                 std::strerror(errno));
  }

  fs::path path_;
  std::FILE* file_ = nullptr;
  bool reported_ = false;
};

class CsvLogger : public sdk::Logger {
 public:
  CsvLogger(std::string file, std::string text_file) : file_(std::move(file)), text_file_(std::move(text_file)) {}

  void open(const sdk::RunInfo& run) override {
    const fs::path dir(run.output_dir);
    metrics_ = std::make_unique<CsvFile>(dir / file_, kMetricsHeader, run);
    if (!text_file_.empty()) texts_ = std::make_unique<CsvFile>(dir / text_file_, kTextHeader, run);
  }

  void log_metrics(const sdk::MetricRecord& record) override {
    if (!metrics_) return;
    // step, phase and time are the same on every row of a record.
    const std::string prefix = std::to_string(record.step) + "," + csv_field(record.phase) + "," +
                               format_double(record.wall_time) + ",";
    for (const auto& [name, value] : record.values)
      metrics_->write_line(prefix + csv_field(name) + "," + format_double(value));
  }

  void log_text(int64_t step, const std::string& tag, const std::string& text) override {
    if (!texts_) return;
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    texts_->write_line(std::to_string(step) + "," + format_double(now) + "," + csv_field(tag) + "," +
                       csv_field(text));
  }

  void flush() override {
    if (metrics_) metrics_->flush();
    if (texts_) texts_->flush();
  }

  void close() override {
    if (metrics_) metrics_->close();
    if (texts_) texts_->close();
  }

 private:
  std::string file_;
  std::string text_file_;
  std::unique_ptr<CsvFile> metrics_;
  std::unique_ptr<CsvFile> texts_;
};

void register_csv(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  spec.add_string("file", "metrics.csv")
      .with_doc("Metrics file inside the run folder; long form: step,phase,time,name,value.");
  spec.add_string("text_file", "text.csv")
      .with_doc("Texts (samples) file inside the run folder: step,time,tag,text; \"\" drops texts.");
  registry.add_logger({"csv", "Metrics as CSV rows step,phase,time,name,value (metrics.csv)", std::move(spec)},
                      [](const sdk::Options& options) -> std::unique_ptr<sdk::Logger> {
                        if (options.get_string("file").empty())
                          throw sdk::OptionError("file must not be empty");
                        if (options.get_string("file") == options.get_string("text_file"))
                          throw sdk::OptionError("file and text_file must differ");
                        return std::make_unique<CsvLogger>(options.get_string("file"),
                                                           options.get_string("text_file"));
                      });
}

}  // namespace

FTCORE_PLUGIN("csv", "1.0.0", "Apache-2.0", register_csv)

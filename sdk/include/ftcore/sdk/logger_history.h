// For loggers that append to a file in the run folder: trims that file, when
// the logger opens, to the history the run continues (kResumedAtStep in
// ftcore/sdk/logger.h), so a resumed run never holds a step twice and a
// fresh start never appends a second history.
//
//   fresh start:          the file is emptied
//   resumed at step N:    the records `keep(record, N)` accepts stay, in
//                         order; a last record without its line end (cut
//                         by a kill) goes
//
// The file is rewritten through <file>.tmp and renamed, so a kill during the
// trim leaves the old file or the trimmed one.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ftcore/sdk/logger.h"

namespace ftcore::sdk {

// The whole records of `text`, each with its '\n'. With `csv_quotes`, a line
// break inside a double-quoted field does not end a record (RFC 4180).
inline std::vector<std::string> complete_records(const std::string& text, bool csv_quotes) {
  std::vector<std::string> records;
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (csv_quotes && text[i] == '"') quoted = !quoted;  // a doubled quote toggles twice
    if (text[i] == '\n' && !quoted) {
      records.push_back(text.substr(start, i + 1 - start));
      start = i + 1;
    }
  }
  return records;
}

inline void trim_history(const std::filesystem::path& path, const RunInfo& run, bool csv_quotes,
                         const std::function<bool(const std::string& record, int64_t resumed_at_step)>& keep) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  std::string kept;
  const auto resumed = run.metadata.find(kResumedAtStep);
  if (resumed != run.metadata.end()) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    const int64_t step = std::stoll(resumed->second);
    for (const std::string& record : complete_records(text.str(), csv_quotes))
      if (keep(record, step)) kept += record;
  }
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << kept;
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      throw std::runtime_error("cannot write " + tmp.string() + ": " + std::strerror(errno));
    }
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace ftcore::sdk

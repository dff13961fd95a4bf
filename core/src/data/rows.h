// Reading dataset rows from JSONL (one object per line; blank lines skipped)
// or JSON (an array of objects, or {"data": [...]}) with their line numbers,
// so every later error can say file:line.
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

namespace ftcore::data {

struct Row {
  nlohmann::json value;
  int64_t line = 0;  // JSONL: the 1-based line; JSON: the 1-based row index
  std::string error; // a syntax error in this line (JSONL), "" when parsed
};

std::vector<Row> read_rows(const std::filesystem::path& path);

}  // namespace ftcore::data

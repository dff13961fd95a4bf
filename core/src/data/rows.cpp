// JSONL / JSON row reading with line numbers.
#include "rows.h"

#include <fstream>
#include <sstream>

#include "ftcore/dataset.h"

namespace ftcore::data {

std::vector<Row> read_rows(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(path.string() + ": cannot open the dataset file");
  std::vector<Row> rows;
  const std::string ext = path.extension().string();
  if (ext == ".json") {
    std::stringstream buffer;
    buffer << in.rdbuf();
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(buffer.str());
    } catch (const nlohmann::json::parse_error& e) {
      throw DataError(path.string() + ": malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what());
    } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
      throw DataError(path.string() + ": unreadable JSON: " + e.what());
    }
    if (doc.is_object() && doc.contains("data")) doc = doc["data"];
    if (!doc.is_array()) throw DataError(path.string() + ": a JSON dataset must be an array of rows");
    int64_t index = 0;
    for (auto& item : doc) rows.push_back({std::move(item), ++index, ""});
    return rows;
  }
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    Row row;
    row.line = number;
    try {
      row.value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      row.error = "malformed JSON at column " + std::to_string(e.byte) + ": " + e.what();
    } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
      row.error = std::string("unreadable JSON: ") + e.what();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace ftcore::data

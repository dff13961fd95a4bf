// Strict readers of config.json values for hf_config.cpp and
// model_families.cpp: each names the file (`origin`) and the key when a value
// is missing or of the wrong type; none falls back silently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ftcore/model_config.h"

namespace ftcore::config_json {

using nlohmann::json;

[[noreturn]] inline void fail(const std::string& origin, const std::string& message) {
  throw ModelError(origin + ": " + message);
}

inline json parse_json(const std::string& text, const std::string& origin) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) fail(origin, "expected a JSON object");
    return j;
  } catch (const json::exception& e) {
    fail(origin, std::string("invalid JSON: ") + e.what());
  }
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path.string() + ": cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool has(const json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

inline int64_t get_int(const json& j, const char* key, const std::string& origin) {
  if (!has(j, key)) fail(origin, std::string("missing required key '") + key + "'");
  const json& v = j.at(key);
  if (!v.is_number_integer()) fail(origin, std::string("'") + key + "' must be an integer, got " + v.dump());
  return v.get<int64_t>();
}
inline int64_t get_int(const json& j, const char* key, int64_t fallback, const std::string& origin) {
  return has(j, key) ? get_int(j, key, origin) : fallback;
}
inline double get_number(const json& j, const char* key, double fallback, const std::string& origin) {
  if (!has(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number()) fail(origin, std::string("'") + key + "' must be a number, got " + v.dump());
  return v.get<double>();
}
inline bool get_bool(const json& j, const char* key, bool fallback, const std::string& origin) {
  if (!has(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_boolean()) fail(origin, std::string("'") + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}
inline std::string get_string(const json& j, const char* key, const std::string& fallback, const std::string& origin) {
  if (!has(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_string()) fail(origin, std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}
inline std::optional<int64_t> get_optional_int(const json& j, const char* key, const std::string& origin) {
  if (!has(j, key)) return std::nullopt;
  return get_int(j, key, origin);
}
// eos_token_id is an int or a list of ints.
inline std::vector<int64_t> get_id_list(const json& j, const char* key, const std::string& origin) {
  if (!has(j, key)) return {};
  const json& v = j.at(key);
  if (v.is_number_integer()) return {v.get<int64_t>()};
  std::vector<int64_t> ids;
  if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(origin, std::string("'") + key + "' must hold integers, got " + v.dump());
      ids.push_back(e.get<int64_t>());
    }
    return ids;
  }
  fail(origin, std::string("'") + key + "' must be an integer or a list of integers, got " + v.dump());
}

inline std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// A list of numbers (longrope's factors).
inline std::vector<double> get_number_list(const json& j, const char* key, const std::string& origin) {
  if (!has(j, key)) fail(origin, std::string("missing required key '") + key + "'");
  const json& v = j.at(key);
  std::vector<double> out;
  if (v.is_array())
    for (const json& e : v) {
      if (!e.is_number()) fail(origin, std::string("'") + key + "' must hold numbers, got " + v.dump());
      out.push_back(e.get<double>());
    }
  else
    fail(origin, std::string("'") + key + "' must be a list of numbers, got " + v.dump());
  return out;
}

}  // namespace ftcore::config_json

// Reading tokenizer.json fields with errors that say where: every failure is
// a TokenizerError "<source>: <json path>: <what was wrong>".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ftcore/tokenizer.h"

namespace ftcore::tokenizer {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& node, std::string source, std::string path)
      : node_(node), source_(std::move(source)), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const { throw TokenizerError(source_ + ": " + path_ + ": " + what); }

  const nlohmann::json& node() const { return node_; }
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  bool has(const char* key) const { return node_.is_object() && node_.contains(key) && !node_.at(key).is_null(); }
  JsonFields child(const char* key) const {
    if (!has(key)) fail(std::string("missing '") + key + "'");
    return JsonFields(node_.at(key), source_, path_ + "." + key);
  }
  JsonFields element(size_t i) const { return JsonFields(node_.at(i), source_, path_ + "[" + std::to_string(i) + "]"); }

  std::string type() const {
    if (!node_.is_object()) fail("expected an object, got " + std::string(node_.type_name()));
    if (!has("type") || !node_.at("type").is_string()) fail("no \"type\"");
    return node_.at("type").get<std::string>();
  }
  std::string string(const char* key) const {
    if (!has(key) || !node_.at(key).is_string()) fail(std::string("'") + key + "' must be a string");
    return node_.at(key).get<std::string>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!node_.at(key).is_boolean()) fail(std::string("'") + key + "' must be true or false");
    return node_.at(key).get<bool>();
  }
  int64_t integer(const char* key, int64_t fallback) const {
    if (!has(key)) return fallback;
    if (!node_.at(key).is_number_integer()) fail(std::string("'") + key + "' must be an integer");
    return node_.at(key).get<int64_t>();
  }
  size_t array_size() const {
    if (!node_.is_array()) fail("expected an array, got " + std::string(node_.type_name()));
    return node_.size();
  }
  [[noreturn]] void unsupported(const std::string& what, const std::string& type, const char* supported) const {
    fail(what + " type '" + type + "' is not supported (supported: " + supported + ")");
  }

 private:
  const nlohmann::json& node_;
  std::string source_;
  std::string path_;
};

}  // namespace ftcore::tokenizer

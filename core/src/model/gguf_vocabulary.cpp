#include "gguf_vocabulary.h"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "../tokenizer/utf8.h"

namespace ftcore::gguf_vocab {

namespace {

std::string where(const gguf::File& file, const std::string& key) { return file.path().string() + ": " + key; }

}  // namespace

Vocabulary read_vocabulary(const gguf::File& file) {
  Vocabulary v;
  const gguf::Value* tokens = file.find_metadata("tokenizer.ggml.tokens");
  if (!tokens) throw std::runtime_error(file.path().string() + ": no tokenizer.ggml.tokens");
  v.tokens = tokens->strings;
  for (size_t id = 0; id < v.tokens.size(); ++id)
    if (tokenizer::find_invalid_utf8(v.tokens[id]))
      throw std::runtime_error(where(file, "tokenizer.ggml.tokens") + "[" + std::to_string(id) +
                               "] is not valid UTF-8");
  const gguf::Value* types = file.find_metadata("tokenizer.ggml.token_type");
  v.has_types = types != nullptr;
  if (!types) {
    v.types.assign(v.tokens.size(), kNormal);
    return v;
  }
  const std::string key = "tokenizer.ggml.token_type";
  if (types->ints.size() != v.tokens.size())
    throw std::runtime_error(where(file, key) + " holds " + std::to_string(types->ints.size()) + " types for " +
                             std::to_string(v.tokens.size()) + " tokens");
  for (size_t id = 0; id < types->ints.size(); ++id) {
    const int64_t t = types->ints[id];
    if (t < kUndefined || t > kByte)
      throw std::runtime_error(where(file, key) + "[" + std::to_string(id) + "] is " + std::to_string(t) +
                               ", not a llama.cpp token type (0 undefined, 1 normal, 2 unknown, 3 control, "
                               "4 user-defined, 5 unused, 6 byte)");
  }
  v.types = types->ints;
  return v;
}

std::vector<double> read_scores(const gguf::File& file, size_t count) {
  const std::string key = "tokenizer.ggml.scores";
  const gguf::Value* scores = file.find_metadata(key);
  if (!scores)
    throw std::runtime_error(where(file, key) +
                             " is missing: a SentencePiece vocabulary without tokenizer.ggml.merges needs the "
                             "scores to order its merges");
  if (scores->floats.size() != count)
    throw std::runtime_error(where(file, key) + " holds " + std::to_string(scores->floats.size()) +
                             " scores for " + std::to_string(count) + " tokens");
  for (size_t id = 0; id < count; ++id)
    if (std::isnan(scores->floats[id]))
      throw std::runtime_error(where(file, key) + "[" + std::to_string(id) + "] is NaN");
  return scores->floats;
}

TokenIds::TokenIds(const std::vector<std::string>& tokens) : tokens_(tokens) {
  ids_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) ids_[tokens[id]] = static_cast<int64_t>(id);
}

int64_t TokenIds::find(std::string_view token) const {
  const auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

nlohmann::ordered_json TokenIds::to_json() const {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  // ordered_json's operator[] scans every key; append to the underlying
  // vector instead (49k tokens: 2.6 s -> milliseconds). A repeated token is
  // written once, at its first place, with the id it kept.
  auto& entries = vocab.get_ref<nlohmann::ordered_json::object_t&>();
  entries.reserve(ids_.size());
  std::unordered_set<std::string_view> written;
  written.reserve(ids_.size());
  for (const std::string& token : tokens_)
    if (written.insert(token).second) entries.emplace_back(token, find(token));
  return vocab;
}

nlohmann::ordered_json added_token_json(int64_t id, const std::string& content, bool special, bool normalized) {
  return {{"id", id},
          {"content", content},
          {"single_word", false},
          {"lstrip", false},
          {"rstrip", false},
          {"normalized", normalized},
          {"special", special}};
}

std::string named_token(const gguf::File& file, const std::vector<std::string>& tokens, const char* id_key) {
  const gguf::Value* v = file.find_metadata(std::string("tokenizer.ggml.") + id_key);
  if (!v || v->i < 0 || static_cast<size_t>(v->i) >= tokens.size()) return "";
  return tokens[static_cast<size_t>(v->i)];
}

}  // namespace ftcore::gguf_vocab

// The vocabulary in a GGUF file's tokenizer metadata (tokenizer.ggml.*), read
// and checked once for every tokenizer kind: tokens, token types, scores; and
// the tokenizer.json pieces every kind builds from them.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "ftcore/gguf.h"

namespace ftcore::gguf_vocab {

// llama.cpp's token types (tokenizer.ggml.token_type).
enum TokenType : int64_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

struct Vocabulary {
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens, by id
  std::vector<int64_t> types;       // one per token (kNormal for all when the file has none)
  bool has_types = false;
};

// tokenizer.ggml.tokens and token_type; errors name the file and the key
// (missing tokens, a type list of another length, a type llama.cpp does not
// define, a token that is not UTF-8).
Vocabulary read_vocabulary(const gguf::File& file);

// tokenizer.ggml.scores, one per token; an error naming the file and key
// when absent, of another length, or NaN (a merge order needs them).
std::vector<double> read_scores(const gguf::File& file, size_t count);

// Token -> id as transformers builds it, a Python dict from the token list:
// a token listed twice keeps its last id. Views into `tokens`, which must
// outlive this.
class TokenIds {
 public:
  explicit TokenIds(const std::vector<std::string>& tokens);
  int64_t find(std::string_view token) const;  // -1 when absent
  // tokenizer.json's "vocab": each token once, in the order it first appears.
  nlohmann::ordered_json to_json() const;

 private:
  const std::vector<std::string>& tokens_;
  std::unordered_map<std::string_view, int64_t> ids_;
};

// One entry of tokenizer.json's "added_tokens".
nlohmann::ordered_json added_token_json(int64_t id, const std::string& content, bool special, bool normalized);

// The token an id key (e.g. "bos_token_id") names, or "" when the file has
// none or the id is outside the vocabulary.
std::string named_token(const gguf::File& file, const std::vector<std::string>& tokens, const char* id_key);

}  // namespace ftcore::gguf_vocab

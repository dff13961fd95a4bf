// The Tokenizer behind every loader: HF tokenizers' pipeline over the parts
// of a tokenizer.json (added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor; decoder on the way back), plus the special token ids and
// chat template that tokenizer_config.json or GGUF metadata supply.
#pragma once

#include <optional>
#include <string>

#include "ftcore/tokenizer.h"
#include "tokenizer_json.h"

namespace ftcore::tokenizer {

// What tokenizer_config.json (or GGUF metadata) adds to tokenizer.json.
struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token;
  std::string chat_template;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // `source` names where the tokenizer came from, for error messages.
  BpeTokenizer(TokenizerParts parts, const TokenizerConfig& config, std::string source);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const override;

  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override;

  std::optional<int32_t> bos_id() const override { return bos_id_; }
  std::optional<int32_t> eos_id() const override { return eos_id_; }
  std::optional<int32_t> pad_id() const override { return pad_id_; }
  const std::string& chat_template() const override { return chat_template_; }

 private:
  // The token string decoders see for `id` (nullptr: no such id).
  const std::string* token_string(int32_t id) const;
  std::optional<int32_t> id_of_config_token(const std::optional<std::string>& token, const char* role) const;

  TokenizerParts parts_;
  std::string source_;
  int64_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_, eos_id_, pad_id_;
  std::string chat_template_;
};

}  // namespace ftcore::tokenizer

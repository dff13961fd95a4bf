// Encode and decode in HF tokenizers' order:
//   added tokens in the raw text -> normalize the rest -> normalized added
//   tokens -> pre-tokenize -> BPE each piece -> post-process (BOS etc.);
//   ids -> token strings (minus special ones when asked) -> decoder -> join.
#include "bpe_tokenizer.h"

#include "utf8.h"

namespace ftcore::tokenizer {

BpeTokenizer::BpeTokenizer(TokenizerParts parts, const TokenizerConfig& config, std::string source)
    : parts_(std::move(parts)), source_(std::move(source)), chat_template_(config.chat_template) {
  vocab_size_ = parts_.model->size() + parts_.added.count_beyond(*parts_.model);
  bos_id_ = id_of_config_token(config.bos_token, "bos_token");
  eos_id_ = id_of_config_token(config.eos_token, "eos_token");
  pad_id_ = id_of_config_token(config.pad_token, "pad_token");
}

std::optional<int32_t> BpeTokenizer::id_of_config_token(const std::optional<std::string>& token,
                                                        const char* role) const {
  if (!token) return std::nullopt;
  auto id = token_to_id(*token);
  if (!id) throw TokenizerError(source_ + ": " + role + " '" + *token + "' is not in the vocabulary");
  return id;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (auto bad = find_invalid_utf8(text))
    throw TokenizerError("encode: the text is not valid UTF-8 (byte " + std::to_string(*bad) + " of " +
                         std::to_string(text.size()) + ")");
  if (text.size() >= UINT32_MAX / 4)
    throw TokenizerError("encode: the text is too long (" + std::to_string(text.size()) + " bytes)");
  std::vector<int32_t> ids;
  thread_local Pieces pieces;
  pieces.text.assign(text);
  pieces.list.clear();
  if (!text.empty()) {
    const auto first_char = static_cast<uint32_t>(utf8_length(static_cast<unsigned char>(text[0])));
    pieces.list.push_back({0, static_cast<uint32_t>(text.size()), -1, first_char});
  }
  parts_.added.split_raw(pieces);
  parts_.added.normalize_and_split(pieces, parts_.normalizer.get());
  if (parts_.pre_tokenizer) parts_.pre_tokenizer->pre_tokenize(pieces);
  ids.reserve(pieces.text.size() / 3 + 4);
  for (const Piece& p : pieces.list) {
    if (p.is_added())
      ids.push_back(p.added_id);
    else
      parts_.model->tokenize(pieces.view(p), ids);
  }
  if (parts_.post_processor) parts_.post_processor->process(ids, add_special_tokens);
  return ids;
}

const std::string* BpeTokenizer::token_string(int32_t id) const {
  if (const std::string* added = parts_.added.decode_form(id)) return added;
  return parts_.model->id_to_token(id);
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* token = token_string(id);
    if (!token) continue;  // HF drops ids it does not know
    if (skip_special_tokens && parts_.added.is_special_content(*token)) continue;
    tokens.push_back(*token);
  }
  if (!parts_.decoder) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  parts_.decoder->decode_chain(tokens);
  std::string joined;
  for (const std::string& t : tokens) joined += t;
  return joined;
}

std::optional<int32_t> BpeTokenizer::token_to_id(std::string_view token) const {
  if (auto id = parts_.added.token_to_id(token)) return id;
  return parts_.model->token_to_id(token);
}

std::string BpeTokenizer::id_to_token(int32_t id) const {
  const std::string* token = token_string(id);
  if (!token) throw TokenizerError(source_ + ": id " + std::to_string(id) + " is not in the vocabulary");
  return *token;
}

bool BpeTokenizer::is_special(int32_t id) const {
  const std::string* token = token_string(id);
  return token && parts_.added.is_special_content(*token);
}

}  // namespace ftcore::tokenizer

// GGUF tokenizer metadata -> HF tokenizers' tokenizer.json.
//
// The pre-tokenizer is not stored in GGUF, only its llama.cpp name
// (`tokenizer.ggml.pre`); we map the names llama.cpp defines for the
// families we support to the pre-tokenizer their HF tokenizer.json uses:
//   smollm            digits split one by one, then GPT-2's byte-level regex
//   gpt2, default     GPT-2's byte-level regex
//   llama-bpe/llama3  Llama 3's split regex, then byte-level without regex
//   qwen2             Qwen2's split regex, then byte-level without regex
#include "gguf_tokenizer_json.h"

#include <stdexcept>
#include <string_view>
#include <unordered_set>

namespace ftcore {

namespace {

constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

nlohmann::ordered_json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

nlohmann::ordered_json split_then_byte_level(const char* regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
            byte_level(false)}}};
}

nlohmann::ordered_json pre_tokenizer_for(const std::string& pre) {
  if (pre == "smollm")
    return {{"type", "Sequence"},
            {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}}};
  if (pre == "gpt2" || pre == "default") return byte_level(true);
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") return split_then_byte_level(kLlama3Split);
  if (pre == "qwen2") return split_then_byte_level(kQwen2Split);
  throw std::runtime_error("GGUF pre-tokenizer '" + pre +
                           "' is not supported (smollm, gpt2, default, llama-bpe, llama3, qwen2 are)");
}

const std::vector<std::string>& tokens_of(const gguf::File& file) {
  const gguf::Value* tokens = file.find_metadata("tokenizer.ggml.tokens");
  if (!tokens) throw std::runtime_error(file.path().string() + ": no tokenizer.ggml.tokens");
  return tokens->strings;
}

std::string token_or_empty(const gguf::File& file, const std::vector<std::string>& tokens, const char* key) {
  const gguf::Value* v = file.find_metadata(std::string("tokenizer.ggml.") + key);
  if (!v || v->i < 0 || static_cast<size_t>(v->i) >= tokens.size()) return "";
  return tokens[static_cast<size_t>(v->i)];
}

}  // namespace

nlohmann::ordered_json gguf_tokenizer_json(const gguf::File& file) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    throw std::runtime_error(file.path().string() + ": tokenizer model '" + model +
                             "' is not supported by ftcore convert (byte-level BPE, \"gpt2\", is)");
  const auto& tokens = tokens_of(file);
  const gguf::Value* types = file.find_metadata("tokenizer.ggml.token_type");
  const gguf::Value* merges = file.find_metadata("tokenizer.ggml.merges");
  const std::string pre = file.find_metadata("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";

  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  // ordered_json's operator[] scans every key; append to the underlying
  // vector instead (49k tokens: 2.6 s -> milliseconds), skipping duplicates.
  auto& vocab_entries = vocab.get_ref<nlohmann::ordered_json::object_t&>();
  std::unordered_set<std::string_view> seen;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (seen.insert(tokens[id]).second) vocab_entries.emplace_back(tokens[id], id);
    const int64_t type = types && id < types->ints.size() ? types->ints[id] : 1;
    if (type == 3 || type == 4) {  // llama.cpp: 3 CONTROL (special), 4 USER_DEFINED (added, not special)
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == 4},
                       {"special", type == 3}});
    }
  }
  nlohmann::ordered_json merge_list = nlohmann::ordered_json::array();
  if (merges)
    for (const auto& m : merges->strings) merge_list.push_back(m);
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer_for(pre)},
          {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", merge_list}}}};
}

nlohmann::ordered_json gguf_tokenizer_config_json(const gguf::File& file) {
  const auto& tokens = tokens_of(file);
  nlohmann::ordered_json config = {{"tokenizer_class", "GPT2Tokenizer"},
                                   {"add_prefix_space", false},
                                   {"clean_up_tokenization_spaces", false}};
  const gguf::Value* add_bos = file.find_metadata("tokenizer.ggml.add_bos_token");
  config["add_bos_token"] = add_bos ? add_bos->b : false;
  for (const auto& [key, gguf_key] : std::vector<std::pair<std::string, const char*>>{
           {"bos_token", "bos_token_id"}, {"eos_token", "eos_token_id"},
           {"unk_token", "unknown_token_id"}, {"pad_token", "padding_token_id"}}) {
    std::string t = token_or_empty(file, tokens, gguf_key);
    if (!t.empty()) config[key] = t;
  }
  if (const gguf::Value* ctx = file.find_metadata("llama.context_length")) config["model_max_length"] = ctx->i;
  if (file.find_metadata("tokenizer.chat_template")) config["chat_template"] = file.get_string("tokenizer.chat_template");
  return config;
}

}  // namespace ftcore

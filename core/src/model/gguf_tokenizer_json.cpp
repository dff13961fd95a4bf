// GGUF tokenizer metadata -> HF tokenizers' tokenizer.json, by
// tokenizer.ggml.model: "llama" (SentencePiece) in gguf_sentencepiece.cpp,
// "gpt2" (byte-level BPE) here.
//
// A byte-level vocabulary's pre-tokenizer is not stored in GGUF, only its llama.cpp name
// (`tokenizer.ggml.pre`); we map the names llama.cpp defines for the
// families we support to the pre-tokenizer their HF tokenizer.json uses:
//   smollm            digits split one by one, then GPT-2's byte-level regex
//   gpt2, default     GPT-2's byte-level regex
//   llama-bpe/llama3  Llama 3's split regex, then byte-level without regex
//   qwen2             Qwen2's split regex, then byte-level without regex
#include "gguf_tokenizer_json.h"

#include <stdexcept>

#include "gguf_sentencepiece.h"
#include "gguf_vocabulary.h"

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

nlohmann::ordered_json byte_level_tokenizer_json(const gguf::File& file, const gguf_vocab::Vocabulary& vocab) {
  const gguf::Value* merges = file.find_metadata("tokenizer.ggml.merges");
  const std::string pre = file.find_metadata("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const int64_t type = vocab.types[id];
    if (type == gguf_vocab::kControl || type == gguf_vocab::kUserDefined)  // special / added, not special
      added.push_back(gguf_vocab::added_token_json(static_cast<int64_t>(id), vocab.tokens[id],
                                                   type == gguf_vocab::kControl, type == gguf_vocab::kUserDefined));
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
            {"vocab", gguf_vocab::TokenIds(vocab.tokens).to_json()},
            {"merges", merge_list}}}};
}

std::string tokenizer_model(const gguf::File& file) {
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama")
    throw std::runtime_error(file.path().string() + ": tokenizer.ggml.model '" + model +
                             "' is not supported by ftcore convert (\"gpt2\": byte-level BPE, \"llama\": "
                             "SentencePiece are)");
  return model;
}

}  // namespace

nlohmann::ordered_json gguf_tokenizer_json(const gguf::File& file) {
  const std::string model = tokenizer_model(file);
  const gguf_vocab::Vocabulary vocab = gguf_vocab::read_vocabulary(file);
  return model == "llama" ? sentencepiece_tokenizer_json(file, vocab) : byte_level_tokenizer_json(file, vocab);
}

nlohmann::ordered_json gguf_tokenizer_config_json(const gguf::File& file) {
  const std::string model = tokenizer_model(file);
  const auto tokens = gguf_vocab::read_vocabulary(file).tokens;
  nlohmann::ordered_json config;
  if (model == "llama") {
    config = sentencepiece_tokenizer_config(file);
  } else {
    config = {{"tokenizer_class", "GPT2Tokenizer"}, {"add_prefix_space", false}, {"clean_up_tokenization_spaces", false}};
    const gguf::Value* add_bos = file.find_metadata("tokenizer.ggml.add_bos_token");
    config["add_bos_token"] = add_bos ? add_bos->b : false;
  }
  for (const auto& [key, gguf_key] : std::vector<std::pair<std::string, const char*>>{
           {"bos_token", "bos_token_id"}, {"eos_token", "eos_token_id"},
           {"unk_token", "unknown_token_id"}, {"pad_token", "padding_token_id"}}) {
    std::string t = gguf_vocab::named_token(file, tokens, gguf_key);
    if (!t.empty()) config[key] = t;
  }
  if (const gguf::Value* ctx = file.find_metadata("llama.context_length")) config["model_max_length"] = ctx->i;
  if (file.find_metadata("tokenizer.chat_template")) config["chat_template"] = file.get_string("tokenizer.chat_template");
  return config;
}

}  // namespace ftcore

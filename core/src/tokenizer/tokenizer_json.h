// tokenizer.json (HF tokenizers' serialization, version 1.0) -> the parts of
// a tokenizer. Components outside what ftcore implements are refused by name,
// with the JSON path and the list of what is supported; every error is a
// TokenizerError that starts with the source (the file's path).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "added_vocabulary.h"
#include "bpe_model.h"
#include "decoders.h"
#include "json_fields.h"
#include "normalizers.h"
#include "post_processors.h"
#include "pre_tokenizers.h"

namespace ftcore::tokenizer {

struct TokenizerParts {
  std::unique_ptr<Normalizer> normalizer;      // null: none
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null: none
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<PostProcessor> post_processor;  // null: none
  std::unique_ptr<Decoder> decoder;              // null: tokens joined with spaces, as HF
  AddedVocabulary added;
};

TokenizerParts parse_tokenizer_json(const nlohmann::json& root, const std::string& source);

// The sections other than the model (tokenizer_json_components.cpp).
std::unique_ptr<Normalizer> parse_normalizer(const JsonFields& node);
std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const JsonFields& node);
std::unique_ptr<Decoder> parse_decoder(const JsonFields& node);
std::unique_ptr<PostProcessor> parse_post_processor(const JsonFields& node);
// A {"String": ...} or {"Regex": ...} pattern.
std::unique_ptr<Regex> parse_pattern(const JsonFields& node);

}  // namespace ftcore::tokenizer

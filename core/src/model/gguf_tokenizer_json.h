// tokenizer.json and tokenizer_config.json (HF tokenizers' format) from a
// GGUF file's tokenizer metadata: byte-level BPE ("gpt2") and SentencePiece
// ("llama") vocabularies; any other tokenizer.ggml.model is refused naming it.
#pragma once

#include <nlohmann/json.hpp>

#include "ftcore/gguf.h"

namespace ftcore {

nlohmann::ordered_json gguf_tokenizer_json(const gguf::File& file);
nlohmann::ordered_json gguf_tokenizer_config_json(const gguf::File& file);

}  // namespace ftcore

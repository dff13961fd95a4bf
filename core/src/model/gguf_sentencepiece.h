// A GGUF SentencePiece vocabulary (tokenizer.ggml.model "llama": Llama 2,
// Gemma 2/3, Phi-3) as HF tokenizers' tokenizer.json, built the way
// transformers builds it when it loads the GGUF itself
// (integrations/gguf/gguf_tokenizer_mapping.py), so both give the same ids:
// a BPE model with byte fallback whose merges are the file's, or derived
// from the vocabulary (every split of a token into two tokens, ranked by the
// token's score), and per architecture:
//   llama (default)  Metaspace ("first"), decoder Replace/ByteFallback/Fuse/Strip
//   phi3             Prepend "▁" + Replace " " normalizers, no pre-tokenizer
//   gemma, gemma2/3  Replace " " normalizer, Split " "; merges ranked by
//                    file order (Gemma's scores do not follow it); tokens of
//                    spaces only are respelled "▁..."; unk "<unk>"
// Control tokens are special added tokens, user-defined ones plain added
// tokens, and BOS (unless tokenizer.ggml.add_bos_token is false) / EOS (when
// add_eos_token) are added by the post-processor.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ftcore/gguf.h"
#include "gguf_vocabulary.h"

namespace ftcore {

nlohmann::ordered_json sentencepiece_tokenizer_json(const gguf::File& file, const gguf_vocab::Vocabulary& vocab);

// tokenizer_config.json's fields that depend on the SentencePiece flavour:
// the transformers class (whose folder load rebuilds this same pipeline),
// add_bos_token and add_eos_token.
nlohmann::ordered_json sentencepiece_tokenizer_config(const gguf::File& file);

}  // namespace ftcore

// `ftcore convert IN.gguf OUT_DIR`: a GGUF model to an HF folder
// (model.safetensors, config.json naming the HF class, generation_config.json,
// tokenizer.json, tokenizer_config.json) that transformers loads.
//
// Architectures: llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3 (those
// transformers can load from GGUF as well); others are refused with the list.
// Weights are dequantized to the chosen dtype and renamed to HF module paths;
// what llama.cpp's converter changed is undone: llama's attn_q/attn_k rotary
// halves interleaved per head (GGML's pairwise layout -> HF's rotate_half),
// Gemma's norm weights stored as 1 + w, qwen3moe's experts stacked in one
// tensor per projection (split back into the per-expert Linear weights).
#pragma once

#include <filesystem>
#include <string>

#include <c10/core/ScalarType.h>

namespace ftcore {

struct ConvertReport {
  int64_t tensors = 0;
  int64_t parameters = 0;
  std::string architecture;
  bool tied_embeddings = false;
};

// Throws gguf::FormatError / std::runtime_error naming what is unsupported.
// The folder is written under a temporary name and renamed into place.
ConvertReport convert_gguf_to_hf(const std::filesystem::path& gguf_path, const std::filesystem::path& out_dir,
                                 at::ScalarType dtype);

}  // namespace ftcore

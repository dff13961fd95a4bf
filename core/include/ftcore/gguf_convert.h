// `ftcore convert IN.gguf OUT_DIR`: a GGUF Llama-family model to an HF folder
// (model.safetensors, config.json, generation_config.json, tokenizer.json,
// tokenizer_config.json) that transformers and ftcore load.
//
// Weights are dequantized to the chosen dtype, renamed to HF module paths,
// and attn_q/attn_k are un-permuted: llama.cpp's converter interleaves the
// rotary halves of each head (HF's rotate_half layout -> GGML's pairwise
// layout); we undo it so q_proj/k_proj are HF's again.
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

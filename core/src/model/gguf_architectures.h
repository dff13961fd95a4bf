// The GGUF architectures `ftcore convert` writes as HF folders: for each,
// the HF class, the per-layer tensor names, the transforms llama.cpp's
// converter applied (and we undo), and the config.json it gets. The set is
// the one transformers can load from GGUF too (integrations/ggml.py), so
// every conversion is checked against transformers' own loading.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ftcore/gguf.h"

namespace ftcore::gguf_convert {

struct Architecture {
  std::string gguf_name;  // general.architecture
  std::string hf_class;   // config.json "architectures"
  std::string model_type;
  // GGUF suffix after "blk.N." (without .weight/.bias) -> HF path after "model.layers.N.".
  std::vector<std::pair<std::string, std::string>> layer_tensors;
  // llama.cpp interleaves the rotary halves of q/k for llama only.
  bool rotary_permuted = false;
  // Gemma's norms compute x * (1 + w); llama.cpp stores 1 + w.
  bool norms_store_one_plus_weight = false;
  // Mixture of experts: ffn_{gate,up,down}_exps [experts, out, in] split per expert.
  bool experts = false;
};

// The architecture named `gguf_name`, or a runtime_error naming it and the supported ones.
const Architecture& architecture(const std::string& gguf_name, const std::string& where);

// config.json for the file (weights of `tied_embeddings`, converted to `dtype_name`).
nlohmann::ordered_json hf_config(const Architecture& arch, const gguf::File& file, bool tied_embeddings,
                                 const std::string& dtype_name);

}  // namespace ftcore::gguf_convert

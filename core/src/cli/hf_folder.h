// What `ftcore merge` and `ftcore quantize` share: writing a complete HF
// model folder (weights sharded like huggingface_hub, config.json, the
// tokenizer and generation files of the source folder) through OUT.tmp, and
// comparing a model's logits on a few sample sentences before and after.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/sdk/tensor_map.h"

namespace ftcore::cli {

std::string hf_dtype_name(c10::ScalarType dtype);  // "bfloat16", "float16", "float32"

// A few tokenized sample sentences ([1, T] each; fixed ids without a tokenizer).
std::vector<at::Tensor> sample_inputs(const std::filesystem::path& model_dir, int64_t vocab_size);
// fp32 logits of each input, in eval mode without grad.
std::vector<at::Tensor> logits_of(Model& model, const std::vector<at::Tensor>& inputs);
double max_abs_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b);

// Writes the folder's files into `tmp` (config.json from `model_dir` with
// torch_dtype = dtype, then `edit_config`); returns the weight files' names.
// Callers pass it to write_folder_atomically (ftcore/atomic_file.h), which
// gives it OUT.tmp and swaps OUT into place.
std::vector<std::string> write_folder(const std::filesystem::path& tmp, const std::filesystem::path& model_dir,
                                      const sdk::TensorMap& weights, uint64_t max_shard_bytes, c10::ScalarType dtype,
                                      bool untied, const std::function<void(nlohmann::ordered_json&)>& edit_config = {});

}  // namespace ftcore::cli

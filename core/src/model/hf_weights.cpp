// Model::from_pretrained: an HF folder's config.json plus its weights,
// model.safetensors or the shards named by model.safetensors.index.json
// (memory-mapped; each tensor is converted once into the model's dtype and
// device). Only safetensors are read: a folder with just pytorch_model.bin
// is refused with a sentence saying so.
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/quantized_model.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

void append_file(const fs::path& file, const std::set<std::string>* only, NamedTensors& out) {
  std::shared_ptr<safetensors::File> f;
  try {
    f = safetensors::File::open(file);
  } catch (const safetensors::FormatError& e) {
    throw ModelError(e.what());
  }
  for (const auto& entry : f->entries())
    if (!only || only->count(entry.name)) out.emplace_back(entry.name, f->tensor(entry.name));
}

// The shards of model.safetensors.index.json, each tensor read from the shard the index names.
NamedTensors read_sharded(const fs::path& index_path) {
  std::ifstream in(index_path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(index_path.string() + ": invalid JSON: " + e.what());
  }
  if (!index.contains("weight_map") || !index["weight_map"].is_object())
    throw ModelError(index_path.string() + ": missing the 'weight_map' object");
  std::map<std::string, std::set<std::string>> by_shard;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) throw ModelError(index_path.string() + ": weight_map['" + name + "'] is not a file name");
    const std::string file = shard.get<std::string>();
    if (file.find('/') != std::string::npos || file == "..")
      throw ModelError(index_path.string() + ": shard '" + file + "' is not a file in the folder");
    by_shard[file].insert(name);
  }
  NamedTensors out;
  for (const auto& [shard, names] : by_shard) {
    const fs::path path = index_path.parent_path() / shard;
    if (!fs::exists(path)) throw ModelError(index_path.string() + ": names shard '" + shard + "', which is missing");
    const size_t before = out.size();
    append_file(path, &names, out);
    if (out.size() - before != names.size()) {
      std::set<std::string> got;
      for (size_t i = before; i < out.size(); ++i) got.insert(out[i].first);
      for (const auto& n : names)
        if (!got.count(n)) throw ModelError(path.string() + ": the index places tensor '" + n + "' here, but it is not in the file");
    }
  }
  return out;
}

}  // namespace

NamedTensors read_model_tensors(const fs::path& dir) {
  const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
  NamedTensors tensors;
  if (fs::exists(single)) {
    append_file(single, nullptr, tensors);
  } else if (fs::exists(index)) {
    tensors = read_sharded(index);
  } else if (fs::exists(dir / "pytorch_model.bin") || fs::exists(dir / "pytorch_model.bin.index.json")) {
    throw ModelError(dir.string() + ": only pytorch_model.bin weights; ftcore reads safetensors (save with "
                     "save_pretrained(..., safe_serialization=True))");
  } else {
    throw ModelError(dir.string() + ": no model.safetensors or model.safetensors.index.json");
  }
  return tensors;
}

namespace {

c10::ScalarType choose_dtype(const LoadOptions& options, const ModelConfig& config, const NamedTensors& tensors,
                             const fs::path& dir) {
  c10::ScalarType dtype;
  if (options.dtype) {
    dtype = *options.dtype;
  } else if (config.dtype) {
    dtype = *config.dtype;
  } else {
    auto it = std::find_if(tensors.begin(), tensors.end(),
                           [](const auto& t) { return at::isFloatingType(t.second.scalar_type()); });
    if (it == tensors.end()) throw ModelError(dir.string() + ": no floating-point weights to take the dtype from");
    dtype = it->second.scalar_type();
  }
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf)
    throw ModelError("model dtype " + std::string(c10::toString(dtype)) + " is not supported (supported: fp32, bf16, fp16)");
  return dtype;
}

}  // namespace

std::shared_ptr<Model> Model::from_pretrained(const fs::path& model_dir, const LoadOptions& options) {
  ModelConfig config = read_model_config(model_dir);
  if (is_quantized_folder(model_dir))
    throw ModelError(model_dir.string() + " holds a quantized model (config.json has a quantization_config); "
                     "it loads through its quantizer plugin (load_quantized_model)");
  const NamedTensors tensors = read_model_tensors(model_dir);
  const c10::ScalarType dtype = choose_dtype(options, config, tensors, model_dir);
  if (options.device.is_cuda()) {
    std::string why;
    if (!load_cuda_runtime(&why)) throw ModelError("device cuda requested, but CUDA is unavailable: " + why);
    if (!at::hasCUDA()) throw ModelError("device cuda requested, but no CUDA device is visible");
  }
  auto model = std::make_shared<Model>(std::move(config), at::TensorOptions().dtype(dtype).device(options.device));
  model->load_weights(tensors, model_dir.string());
  return model;
}

}  // namespace ftcore

// What `ftcore merge` and `ftcore quantize` share: a complete HF model
// folder written atomically, and the logits check on sample sentences.
#include "hf_folder.h"

#include <cstdio>
#include <fstream>

#include <ATen/ATen.h>

#include "ftcore/atomic_file.h"
#include "ftcore/safetensors.h"
#include "ftcore/tokenizer.h"

namespace fs = std::filesystem;

namespace ftcore::cli {

// Files besides the weights that make the folder complete, copied when present.
const char* const kCopiedFiles[] = {"generation_config.json", "tokenizer.json",    "tokenizer_config.json",
                                    "special_tokens_map.json", "chat_template.jinja", "added_tokens.json",
                                    "vocab.json",              "merges.txt",          "tokenizer.model"};

namespace {

// Sample inputs for the before/after check: short sentences of different lengths.
const char* const kSampleTexts[] = {
    "The quick brown fox jumps over the lazy dog.",
    "Question: what is the capital of France? Answer:",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
};

}  // namespace

std::string hf_dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return "float32";
  }
}

std::vector<at::Tensor> sample_inputs(const fs::path& model_dir, int64_t vocab_size) {
  std::vector<at::Tensor> inputs;
  if (fs::exists(model_dir / "tokenizer.json")) {
    auto tokenizer = Tokenizer::from_folder(model_dir);
    for (const char* text : kSampleTexts) {
      std::vector<int32_t> ids = tokenizer->encode(text, /*add_special_tokens=*/true);
      std::vector<int64_t> ids64(ids.begin(), ids.end());
      bool fits = !ids64.empty();
      for (int64_t id : ids64) fits = fits && id >= 0 && id < vocab_size;
      if (fits) inputs.push_back(at::tensor(ids64, at::kLong).unsqueeze(0));
    }
  }
  if (inputs.empty())  // no tokenizer (or ids beyond the model's vocabulary): fixed ids
    for (int64_t length : {7, 16, 29})
      inputs.push_back(at::arange(length, at::kLong).mul(7919).add(3).remainder(vocab_size).unsqueeze(0));
  return inputs;
}

std::vector<at::Tensor> logits_of(Model& model, const std::vector<at::Tensor>& inputs) {
  at::NoGradGuard no_grad;
  model.module().eval();
  std::vector<at::Tensor> out;
  for (const at::Tensor& ids : inputs) {
    ForwardInput f;
    f.input_ids = ids;
    out.push_back(model.forward(f).to(at::kFloat));
  }
  return out;
}

double max_abs_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

namespace {

// Greedy shards in parameter order, as huggingface_hub's split_torch_state_dict_into_shards.
std::vector<sdk::TensorMap> split_shards(const sdk::TensorMap& weights, uint64_t max_bytes) {
  std::vector<sdk::TensorMap> shards(1);
  uint64_t used = 0;
  for (const auto& [name, tensor] : weights.tensors) {
    const uint64_t bytes = tensor.numel() * tensor.element_size();
    if (!shards.back().tensors.empty() && used + bytes > max_bytes) {
      shards.emplace_back();
      used = 0;
    }
    shards.back().add(name, tensor);
    used += bytes;
  }
  for (auto& shard : shards) shard.metadata["format"] = "pt";
  return shards;
}

void write_text(const fs::path& path, const std::string& text) { write_file_atomically(path, text); }

std::string shard_name(size_t index, size_t count) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buffer;
}

}  // namespace

// Writes the folder under `tmp`; returns the weight files' names.
std::vector<std::string> write_folder(const fs::path& tmp, const fs::path& model_dir, const sdk::TensorMap& weights,
                                      uint64_t max_shard_bytes, c10::ScalarType dtype, bool untied,
                                      const std::function<void(nlohmann::ordered_json&)>& edit_config) {
  fs::create_directories(tmp);
  const std::vector<sdk::TensorMap> shards = split_shards(weights, max_shard_bytes);
  std::vector<std::string> files;
  if (shards.size() == 1) {
    files.push_back("model.safetensors");
    safetensors::write_file(tmp / files.back(), shards.front());
  } else {
    nlohmann::ordered_json index;
    uint64_t total = 0;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      files.push_back(shard_name(i, shards.size()));
      safetensors::write_file(tmp / files.back(), shards[i]);
      for (const auto& [name, tensor] : shards[i].tensors) {
        weight_map[name] = files.back();
        total += tensor.numel() * tensor.element_size();
      }
    }
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    write_text(tmp / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  std::ifstream in(model_dir / "config.json");
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in);
  config["torch_dtype"] = hf_dtype_name(dtype);
  if (config.contains("dtype")) config["dtype"] = hf_dtype_name(dtype);  // transformers >= 4.56 spelling
  if (untied) config["tie_word_embeddings"] = false;
  if (edit_config) edit_config(config);
  write_text(tmp / "config.json", config.dump(2) + "\n");
  for (const char* name : kCopiedFiles)
    if (fs::exists(model_dir / name)) fs::copy_file(model_dir / name, tmp / name, fs::copy_options::overwrite_existing);
  return files;
}

}  // namespace ftcore::cli

// GGUF -> HF folder: tensor names and transforms per architecture
// (gguf_architectures.h), config files, tokenizer.
#include "ftcore/gguf_convert.h"

#include <regex>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/atomic_file.h"
#include "ftcore/gguf.h"
#include "ftcore/safetensors.h"
#include "gguf_architectures.h"
#include "gguf_tokenizer_json.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

using gguf_convert::Architecture;

// GGUF tensor name -> HF parameter name ("" when the architecture has none).
std::string hf_name(const Architecture& arch, const std::string& name) {
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  static const std::regex layer(R"(blk\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(name, m, layer)) {
    for (const auto& [from, to] : arch.layer_tensors)
      if (m[2] == from) return "model.layers." + m[1].str() + "." + to + "." + m[3].str();
  }
  return "";
}

// Inverse of llama.cpp's permute: [heads, 2, dim/2, in] -> [heads, dim/2, 2, in]
// viewed as GGML stores it; HF wants the halves back together.
at::Tensor unpermute_rotary(const at::Tensor& w, int64_t heads) {
  const int64_t half = w.size(0) / heads / 2;
  auto shape = w.sizes().vec();
  std::vector<int64_t> split = {heads, half, 2};
  split.insert(split.end(), shape.begin() + 1, shape.end());
  return w.reshape(split).transpose(1, 2).reshape(shape).contiguous();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void write_json(const fs::path& path, const nlohmann::ordered_json& j) {
  write_file_atomically(path, j.dump(2) + "\n");
}

const char* dtype_json_name(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
}

// What the file holds that the HF model could not express: refused, not dropped.
void refuse_what_hf_cannot_hold(const Architecture& arch, const gguf::File& file, const std::string& where) {
  if (!arch.experts && file.find_metadata(arch.gguf_name + ".expert_count"))
    throw std::runtime_error(where + ": a mixture-of-experts '" + arch.gguf_name +
                             "' file (e.g. Mixtral) is not supported by ftcore convert (qwen3moe is)");
  const std::string scaling = arch.gguf_name + ".rope.scaling.type";
  if (file.find_metadata(scaling) && file.get_string(scaling) != "none")
    throw std::runtime_error(where + ": rope scaling '" + file.get_string(scaling) +
                             "' is not converted by ftcore convert (" + scaling + ")");
}

}  // namespace

ConvertReport convert_gguf_to_hf(const fs::path& gguf_path, const fs::path& out_dir, at::ScalarType dtype) {
  auto file = gguf::File::open(gguf_path);
  ConvertReport report;
  report.architecture = file->get_string("general.architecture");
  const Architecture& arch = gguf_convert::architecture(report.architecture, gguf_path.string());
  refuse_what_hf_cannot_hold(arch, *file, gguf_path.string());
  const std::string a = arch.gguf_name + ".";
  const int64_t heads = file->get_int(a + "attention.head_count");
  const int64_t kv_heads =
      file->find_metadata(a + "attention.head_count_kv") ? file->get_int(a + "attention.head_count_kv") : heads;

  sdk::TensorMap weights;
  weights.metadata["format"] = "pt";
  auto add = [&](const std::string& name, const at::Tensor& w) {
    report.parameters += w.numel();
    weights.add(name, w.to(dtype));
  };
  static const std::regex expert_tensor(R"(blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight)");
  for (const auto& t : file->tensors()) {
    at::Tensor w = file->dequantize(t.name);
    std::smatch m;
    if (arch.experts && std::regex_match(t.name, m, expert_tensor)) {
      // [experts, out, in] -> HF's per-expert Linear weights (as the hub checkpoints store them).
      for (int64_t e = 0; e < w.size(0); ++e)
        add("model.layers." + m[1].str() + ".mlp.experts." + std::to_string(e) + "." + m[2].str() + "_proj.weight",
            w[e].contiguous());
      ++report.tensors;
      continue;
    }
    const std::string name = hf_name(arch, t.name);
    if (name.empty())
      throw std::runtime_error(gguf_path.string() + ": tensor " + t.name + " has no HF equivalent in " + arch.hf_class);
    if (arch.rotary_permuted && t.name.find(".attn_q.") != std::string::npos) w = unpermute_rotary(w, heads);
    if (arch.rotary_permuted && t.name.find(".attn_k.") != std::string::npos) w = unpermute_rotary(w, kv_heads);
    if (arch.norms_store_one_plus_weight && ends_with(t.name, "norm.weight")) w = w - 1.0;
    add(name, w);
    ++report.tensors;
  }
  report.tied_embeddings = file->find_tensor("output.weight") == nullptr;

  nlohmann::ordered_json config = gguf_convert::hf_config(arch, *file, report.tied_embeddings, dtype_json_name(dtype));
  nlohmann::ordered_json generation = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id", "padding_token_id"}) {
    const std::string full = std::string("tokenizer.ggml.") + key;
    if (file->find_metadata(full)) {
      const std::string hf_key = std::string(key) == "padding_token_id" ? "pad_token_id" : key;
      config[hf_key] = file->get_int(full);
      generation[hf_key] = file->get_int(full);
    }
  }
  const auto* vocab = file->find_metadata("tokenizer.ggml.tokens");
  // Written under <out_dir>.tmp and swapped into place: out_dir is the
  // previous folder or the complete new one, never a mix.
  write_folder_atomically(out_dir, [&](const fs::path& tmp) {
    safetensors::write_file(tmp / "model.safetensors", weights);
    write_json(tmp / "config.json", config);
    write_json(tmp / "generation_config.json", generation);
    if (vocab) {
      write_json(tmp / "tokenizer.json", gguf_tokenizer_json(*file));
      write_json(tmp / "tokenizer_config.json", gguf_tokenizer_config_json(*file));
    }
  });
  return report;
}

}  // namespace ftcore

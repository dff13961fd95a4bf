// GGUF -> HF folder: tensor names, the q/k un-permutation, config files.
#include "ftcore/gguf_convert.h"

#include <regex>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/atomic_file.h"
#include "ftcore/gguf.h"
#include "ftcore/safetensors.h"
#include "gguf_tokenizer_json.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

// GGUF tensor name -> HF parameter name, for the llama architecture.
std::string hf_name(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> per_layer = {
      {"attn_norm.weight", "input_layernorm.weight"},      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},        {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},            {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},            {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"}, {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},             {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  if (name == "token_embd.weight") return "model.embed_tokens.weight";
  if (name == "output_norm.weight") return "model.norm.weight";
  if (name == "output.weight") return "lm_head.weight";
  static const std::regex layer(R"(blk\.(\d+)\.(.+))");
  std::smatch m;
  if (std::regex_match(name, m, layer)) {
    for (const auto& [from, to] : per_layer)
      if (m[2] == from) return "model.layers." + m[1].str() + "." + to;
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

void write_json(const fs::path& path, const nlohmann::ordered_json& j) {
  write_file_atomically(path, j.dump(2) + "\n");
}

const char* dtype_json_name(at::ScalarType dtype) {
  return dtype == at::kBFloat16 ? "bfloat16" : dtype == at::kHalf ? "float16" : "float32";
}

}  // namespace

ConvertReport convert_gguf_to_hf(const fs::path& gguf_path, const fs::path& out_dir, at::ScalarType dtype) {
  auto file = gguf::File::open(gguf_path);
  ConvertReport report;
  report.architecture = file->get_string("general.architecture");
  if (report.architecture != "llama")
    throw std::runtime_error(gguf_path.string() + ": architecture '" + report.architecture +
                             "' is not supported by ftcore convert (llama is)");
  const std::string a = "llama.";
  const int64_t heads = file->get_int(a + "attention.head_count");
  const int64_t kv_heads =
      file->find_metadata(a + "attention.head_count_kv") ? file->get_int(a + "attention.head_count_kv") : heads;
  const int64_t hidden = file->get_int(a + "embedding_length");

  sdk::TensorMap weights;
  weights.metadata["format"] = "pt";
  for (const auto& t : file->tensors()) {
    const std::string name = hf_name(t.name);
    if (name.empty()) throw std::runtime_error(gguf_path.string() + ": tensor " + t.name + " has no HF equivalent");
    at::Tensor w = file->dequantize(t.name);
    if (t.name.find(".attn_q.") != std::string::npos) w = unpermute_rotary(w, heads);
    if (t.name.find(".attn_k.") != std::string::npos) w = unpermute_rotary(w, kv_heads);
    report.parameters += w.numel();
    weights.add(name, w.to(dtype));
    ++report.tensors;
  }
  report.tied_embeddings = file->find_tensor("output.weight") == nullptr;

  const auto* vocab = file->find_metadata("tokenizer.ggml.tokens");
  nlohmann::ordered_json config = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", hidden},
      {"intermediate_size", file->get_int(a + "feed_forward_length")},
      {"num_hidden_layers", file->get_int(a + "block_count")},
      {"num_attention_heads", heads},
      {"num_key_value_heads", kv_heads},
      {"head_dim", hidden / heads},
      {"hidden_act", "silu"},
      {"max_position_embeddings", file->get_int(a + "context_length")},
      {"rms_norm_eps", file->get_float(a + "attention.layer_norm_rms_epsilon")},
      {"rope_theta", file->find_metadata(a + "rope.freq_base") ? file->get_float(a + "rope.freq_base") : 10000.0},
      {"vocab_size", vocab ? static_cast<int64_t>(vocab->strings.size()) : file->get_int(a + "vocab_size")},
      {"tie_word_embeddings", report.tied_embeddings},
      {"attention_bias", file->find_tensor("blk.0.attn_q.bias") != nullptr},
      {"mlp_bias", false},
      {"torch_dtype", dtype_json_name(dtype)},
  };
  nlohmann::ordered_json generation = {{"_from_model_config", true}};
  for (const char* key : {"bos_token_id", "eos_token_id", "padding_token_id"}) {
    const std::string full = std::string("tokenizer.ggml.") + key;
    if (file->find_metadata(full)) {
      const std::string hf_key = std::string(key) == "padding_token_id" ? "pad_token_id" : key;
      config[hf_key] = file->get_int(full);
      generation[hf_key] = file->get_int(full);
    }
  }
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

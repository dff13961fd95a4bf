// What an HF model folder says about a Llama-family decoder: config.json
// (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, MixtralForCausalLM,
// Qwen3MoeForCausalLM; `torch_dtype` or
// `dtype`; RoPE from `rope_scaling` or `rope_parameters`) and
// generation_config.json. Parsing is strict: an unknown architecture, RoPE
// type or activation, or a missing required key, is a ModelError that names
// the file and the key; nothing falls back silently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

namespace ftcore {

class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Rotary embeddings (Su et al., https://arxiv.org/abs/2104.09864) and the
// context-extension variants transformers calls rope types.
struct RopeConfig {
  std::string type = "default";  // default, linear, dynamic, llama3
  double theta = 10000.0;
  double factor = 1.0;                            // linear, dynamic, llama3
  double low_freq_factor = 1.0;                   // llama3
  double high_freq_factor = 4.0;                  // llama3
  int64_t original_max_position_embeddings = 0;  // llama3
};

struct ModelConfig {
  std::string architecture;  // LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM
  std::string model_type;    // llama, mistral, qwen2
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // C
  int64_t intermediate_size = 0;  // the SwiGLU width
  int64_t num_layers = 0;
  int64_t num_heads = 0;     // query heads (H)
  int64_t num_kv_heads = 0;  // key/value heads (G); H % G == 0
  int64_t head_dim = 0;      // D
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Llama attention_bias, always on for Qwen2
  bool o_bias = false;    // Llama attention_bias only
  bool mlp_bias = false;
  // Per layer: the sliding attention window in tokens, 0 for full attention
  // (Mistral's sliding_window, Qwen2's use_sliding_window + layer_types).
  std::vector<int64_t> layer_windows;
  std::optional<c10::ScalarType> dtype;  // the checkpoint's torch_dtype / dtype
  std::optional<int64_t> bos_token_id, pad_token_id;
  std::vector<int64_t> eos_token_ids;

  // Mixture of experts (MixtralForCausalLM, Qwen3MoeForCausalLM; model_moe.h).
  // A sparse layer's MLP is a router over `num_experts` SwiGLU experts of
  // width `moe_intermediate_size`, each token using the top
  // `num_experts_per_tok`; the other layers keep the dense MLP of
  // `intermediate_size`. num_experts == 0: a dense model.
  int64_t num_experts = 0;                // E (num_local_experts / num_experts)
  int64_t num_experts_per_tok = 0;        // K
  int64_t moe_intermediate_size = 0;      // each expert's SwiGLU width
  bool norm_topk_prob = true;             // renormalise the K chosen probabilities (Mixtral always)
  double router_aux_loss_coef = 0.0;      // weight of the load-balancing loss in training
  bool output_router_logits = false;      // config.json's switch for adding it (transformers' default off)
  std::vector<bool> sparse_layers;        // per layer: MoE block (true) or dense MLP
  bool is_moe() const { return num_experts > 0; }
};

// `origin` names the text in errors (usually the file path).
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);
ModelConfig read_model_config(const std::filesystem::path& model_dir);

// The decoding defaults of generation_config.json (transformers' defaults
// where a key is absent; token ids from config.json when the file is absent).
struct GenerationConfig {
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;
  double top_p = 1.0;
  std::optional<int64_t> max_new_tokens;
  std::optional<int64_t> bos_token_id, pad_token_id;
  std::vector<int64_t> eos_token_ids;
};

GenerationConfig parse_generation_config(const std::string& json_text, const std::string& origin,
                                         const ModelConfig& model);
GenerationConfig read_generation_config(const std::filesystem::path& model_dir, const ModelConfig& model);

// "float32" / "bfloat16" / "float16" (and the short names fp32, bf16, fp16).
c10::ScalarType parse_dtype_name(const std::string& name);
std::string dtype_display_name(c10::ScalarType dtype);  // "fp32", "bf16", "fp16"

}  // namespace ftcore

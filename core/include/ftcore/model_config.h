// What an HF model folder says about a decoder: config.json (the
// architectures model_families.cpp maps onto the one decoder; `torch_dtype` or
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
  std::string type = "default";  // default, linear, dynamic, llama3, longrope
  double theta = 10000.0;
  double factor = 1.0;                            // linear, dynamic, llama3
  double low_freq_factor = 1.0;                   // llama3
  double high_freq_factor = 4.0;                  // llama3
  int64_t original_max_position_embeddings = 0;  // llama3, longrope
  // The rotated share of each head: the first int(D * factor) dims turn, the rest pass (Phi-3/4).
  double partial_rotary_factor = 1.0;
  // longrope (Phi-3 "su"): per-frequency divisors, the short ones while the
  // longest position + 1 <= original_max_position_embeddings, else the long
  // ones; cos and sin are multiplied by attention_factor.
  std::vector<double> short_factor, long_factor;
  double attention_factor = 1.0;
};

// How an RMSNorm applies its gain (the statistic is always fp32).
enum class RmsNormStyle {
  llama,  // w * x_hat.to(dtype)
  fp32_gain,  // (w * x_hat).to(dtype)                 OLMo 2
  unit_offset,  // (x_hat * (1 + w)).to(dtype), w from 0  Gemma 2/3
};

// Where a decoder layer normalizes (x the residual stream, r the residual multiplier).
enum class NormPlacement {
  pre,       // x += r * attn(input_ln(x)); x += r * mlp(post_attention_ln(x))         Llama
  post,      // x += post_attention_ln(attn(x)); x += post_feedforward_ln(mlp(x))       OLMo 2
  sandwich,  // x += post_attention_ln(attn(input_ln(x)));
             // x += post_feedforward_ln(mlp(pre_feedforward_ln(x)))                     Gemma 2/3
};

// RMSNorm on the queries and keys, before RoPE.
enum class QkNorm {
  none,
  per_head,          // over each head's D values, one [D] gain    Qwen3, Gemma 3
  whole_projection,  // over all H*D (G*D) values, one [H*D] gain  OLMo 2
};

struct ModelConfig {
  std::string architecture;  // as in config.json, e.g. Qwen3ForCausalLM (supported_architectures())
  std::string model_type;    // llama, mistral, qwen2, qwen3, ...
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

  // --- Normalization (defaults: Llama) ---
  RmsNormStyle norm_style = RmsNormStyle::llama;
  NormPlacement norm_placement = NormPlacement::pre;
  QkNorm qk_norm = QkNorm::none;

  // --- Feed-forward ---
  std::string hidden_act = "silu";  // silu, gelu_pytorch_tanh (GeGLU: Gemma)
  // Phi-3's checkpoint layout: one qkv_proj [H*D + 2*G*D, C] instead of
  // q/k/v_proj, one gate_up_proj [2F, C] (gate rows first) instead of gate/up_proj.
  bool fused_qkv = false;
  bool fused_gate_up = false;

  // --- Scalings and soft-capping (1 / 0 = off) ---
  double embedding_multiplier = 1.0;         // Granite embedding_multiplier; Gemma sqrt(C)
  bool round_embedding_multiplier = false;  // Gemma: the multiplier is first rounded to the activation dtype
  double residual_multiplier = 1.0;          // Granite: each block's output is scaled before the residual add
  double attention_scale = 0.0;              // softmax scale; 0 = D^-1/2 (Granite attention_multiplier,
                                             // Gemma query_pre_attn_scalar^-1/2)
  double logits_divisor = 1.0;               // Granite logits_scaling
  double attn_logit_softcap = 0.0;           // Gemma 2: scores = cap * tanh(scores / cap)
  double final_logit_softcap = 0.0;          // Gemma 2/3: logits = cap * tanh(logits / cap)

  // --- Per-layer positions ---
  // Per layer: whether it applies RoPE (SmolLM3's no_rope_layers); empty = all do.
  std::vector<bool> layer_uses_rope;
  // The RoPE of sliding-window layers when it differs from `rope` (Gemma 3's
  // rope_local_base_freq / rope_parameters.sliding_attention).
  std::optional<RopeConfig> sliding_rope;

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
// The config.json architectures parse_model_config accepts, in a stable order.
std::vector<std::string> supported_architectures();

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

// Each supported architecture's config.json mapped onto ModelConfig's
// switches (model_families.h). The defaults are those of the transformers
// config class of the family; each configure function reads only the keys
// that family's modeling file uses. Sliding windows are per layer: 0 = full
// attention.
#include <algorithm>
#include <cmath>

#include "config_json.h"
#include "model_families.h"

namespace ftcore::families {

using namespace config_json;

namespace {

// Llama's attention_bias covers all four projections; mlp_bias the MLP.
void read_biases(const json& j, ModelConfig& c, const std::string& origin, bool with_mlp_bias) {
  c.qkv_bias = c.o_bias = get_bool(j, "attention_bias", false, origin);
  if (with_mlp_bias) c.mlp_bias = get_bool(j, "mlp_bias", false, origin);
}

// layer_types (one "full_attention" / "sliding_attention" per layer) -> windows of `window` tokens.
void windows_from_layer_types(const json& types, int64_t window, ModelConfig& c, const std::string& origin) {
  if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers)
    fail(origin, "'layer_types' must list one type per layer (" + std::to_string(c.num_layers) + ")");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    std::string t = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
    if (t != "full_attention" && t != "sliding_attention")
      fail(origin, "layer_types[" + std::to_string(i) + "] '" + t +
                       "' is not supported (supported: full_attention, sliding_attention)");
    c.layer_windows[i] = t == "sliding_attention" ? window : 0;
  }
}

// A window the config must give when some layer slides.
int64_t required_window(const json& j, const std::string& origin) {
  const int64_t w = get_int(j, "sliding_window", origin);
  if (w <= 0) fail(origin, "'sliding_window' must be positive, got " + std::to_string(w));
  return w;
}

// Qwen2/3: windows only with use_sliding_window, on the layers layer_types
// (or, without it, those from max_window_layers on) names.
void qwen_windows(const json& j, ModelConfig& c, const std::string& origin) {
  if (!get_bool(j, "use_sliding_window", false, origin)) return;
  const int64_t w = get_int(j, "sliding_window", 4096, origin);
  const int64_t first = get_int(j, "max_window_layers", 28, origin);
  for (int64_t i = 0; i < c.num_layers; ++i) c.layer_windows[i] = i >= first ? w : 0;
  if (has(j, "layer_types")) windows_from_layer_types(j.at("layer_types"), w, c, origin);
}

void configure_llama(const json& j, ModelConfig& c, const std::string& origin) { read_biases(j, c, origin, true); }

void configure_mistral(const json& j, ModelConfig& c, const std::string& origin) {
  std::fill(c.layer_windows.begin(), c.layer_windows.end(), get_int(j, "sliding_window", 0, origin));
}

// The expert counts both MoE families share: E experts, top K of them per token.
void check_expert_counts(const ModelConfig& c, const std::string& origin, const char* experts_key) {
  if (c.num_experts <= 0)
    fail(origin, std::string("'") + experts_key + "' must be positive, got " + std::to_string(c.num_experts));
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts)
    fail(origin, "'num_experts_per_tok' must be in 1.." + std::to_string(c.num_experts) + ", got " +
                     std::to_string(c.num_experts_per_tok));
}

// MixtralConfig's experts: num_local_experts of intermediate_size each, top
// num_experts_per_tok, renormalised, in every layer; Mistral's windows.
void configure_mixtral(const json& j, ModelConfig& c, const std::string& origin) {
  configure_mistral(j, c, origin);
  c.num_experts = get_int(j, "num_local_experts", 8, origin);
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", 2, origin);
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = get_number(j, "router_aux_loss_coef", 0.001, origin);
  c.output_router_logits = get_bool(j, "output_router_logits", false, origin);
  c.sparse_layers.assign(c.num_layers, true);
  check_expert_counts(c, origin, "num_local_experts");
  // Jitter multiplies the router's input by uniform noise in training; not built.
  const double jitter = get_number(j, "router_jitter_noise", 0.0, origin);
  if (jitter != 0.0)
    fail(origin, "'router_jitter_noise' " + std::to_string(jitter) + " is not supported (supported: 0)");
}

void configure_qwen2(const json& j, ModelConfig& c, const std::string& origin) {
  c.qkv_bias = true;  // Qwen2Attention: q/k/v always carry a bias, o_proj never
  qwen_windows(j, c, origin);
}

void configure_qwen3(const json& j, ModelConfig& c, const std::string& origin) {
  read_biases(j, c, origin, false);
  c.qk_norm = QkNorm::per_head;
  qwen_windows(j, c, origin);
}

// Qwen3MoeConfig: Qwen3's attention (q/k norm, attention_bias); experts of
// moe_intermediate_size, top num_experts_per_tok, renormalised only with
// norm_topk_prob. Layer i is sparse unless listed in mlp_only_layers or
// (i + 1) % decoder_sparse_step != 0; the others keep the dense MLP of
// intermediate_size. num_experts (4.x configs) is num_local_experts (what
// transformers 5 writes, its attribute_map); 0 experts = a dense model.
// use_sliding_window slides every layer (Qwen3MoeModel builds one mask from
// sliding_window, its class default 4096, null = none): no max_window_layers.
void configure_qwen3_moe(const json& j, ModelConfig& c, const std::string& origin) {
  read_biases(j, c, origin, false);
  c.qk_norm = QkNorm::per_head;
  if (get_bool(j, "use_sliding_window", false, origin) && !(j.contains("sliding_window") && j.at("sliding_window").is_null()))
    std::fill(c.layer_windows.begin(), c.layer_windows.end(), get_int(j, "sliding_window", 4096, origin));

  const char* experts_key = has(j, "num_local_experts") ? "num_local_experts" : "num_experts";
  if (has(j, "num_local_experts") && has(j, "num_experts") &&
      get_int(j, "num_local_experts", origin) != get_int(j, "num_experts", origin))
    fail(origin, "'num_local_experts' and 'num_experts' (the same setting) disagree");
  const int64_t experts = get_int(j, experts_key, 128, origin);
  const int64_t step = get_int(j, "decoder_sparse_step", 1, origin);
  if (step <= 0) fail(origin, "'decoder_sparse_step' must be positive, got " + std::to_string(step));
  std::vector<bool> sparse(c.num_layers, false);
  for (int64_t i = 0; i < c.num_layers; ++i) sparse[i] = experts > 0 && (i + 1) % step == 0;
  if (has(j, "mlp_only_layers")) {
    const json& dense = j.at("mlp_only_layers");
    if (!dense.is_array()) fail(origin, "'mlp_only_layers' must be a list of layer indices, got " + dense.dump());
    for (const json& layer : dense) {
      if (!layer.is_number_integer() || layer.get<int64_t>() < 0 || layer.get<int64_t>() >= c.num_layers)
        fail(origin, "mlp_only_layers: " + layer.dump() + " is not a layer index (0.." +
                         std::to_string(c.num_layers - 1) + ")");
      sparse[layer.get<int64_t>()] = false;
    }
  }
  if (experts < 0) fail(origin, std::string("'") + experts_key + "' must be positive, got " + std::to_string(experts));
  if (experts == 0 || std::none_of(sparse.begin(), sparse.end(), [](bool s) { return s; }))
    return;  // every layer dense: the model is Qwen3 with its MLPs
  c.num_experts = experts;
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", 8, origin);
  c.moe_intermediate_size = get_int(j, "moe_intermediate_size", 768, origin);
  if (c.moe_intermediate_size <= 0)
    fail(origin, "'moe_intermediate_size' must be positive, got " + std::to_string(c.moe_intermediate_size));
  c.norm_topk_prob = get_bool(j, "norm_topk_prob", false, origin);
  c.router_aux_loss_coef = get_number(j, "router_aux_loss_coef", 0.001, origin);
  c.output_router_logits = get_bool(j, "output_router_logits", false, origin);
  c.sparse_layers = std::move(sparse);
  check_expert_counts(c, origin, experts_key);
}

// SmolLM3: no_rope_layers[i] = 1 where layer i applies RoPE (default: every
// no_rope_layer_interval-th layer goes without).
void configure_smollm3(const json& j, ModelConfig& c, const std::string& origin) {
  read_biases(j, c, origin, true);
  c.layer_uses_rope.assign(c.num_layers, true);
  if (has(j, "no_rope_layers")) {
    const json& flags = j.at("no_rope_layers");
    if (!flags.is_array() || static_cast<int64_t>(flags.size()) != c.num_layers)
      fail(origin, "'no_rope_layers' must list one 0/1 per layer (" + std::to_string(c.num_layers) + ")");
    for (int64_t i = 0; i < c.num_layers; ++i) {
      if (!flags[i].is_number_integer() || (flags[i] != 0 && flags[i] != 1))
        fail(origin, "no_rope_layers[" + std::to_string(i) + "] must be 0 or 1, got " + flags[i].dump());
      c.layer_uses_rope[i] = flags[i] == 1;
    }
  } else {
    const int64_t interval = get_int(j, "no_rope_layer_interval", 4, origin);
    if (interval <= 0) fail(origin, "'no_rope_layer_interval' must be positive");
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_uses_rope[i] = (i + 1) % interval != 0;
  }
  if (get_bool(j, "use_sliding_window", false, origin) && has(j, "layer_types"))
    windows_from_layer_types(j.at("layer_types"), required_window(j, origin), c, origin);
}

void configure_olmo2(const json& j, ModelConfig& c, const std::string& origin) {
  c.qkv_bias = c.o_bias = get_bool(j, "attention_bias", false, origin);
  c.norm_style = RmsNormStyle::fp32_gain;
  c.norm_placement = NormPlacement::post;
  c.qk_norm = QkNorm::whole_projection;
}

void configure_granite(const json& j, ModelConfig& c, const std::string& origin) {
  read_biases(j, c, origin, true);
  c.embedding_multiplier = get_number(j, "embedding_multiplier", 1.0, origin);
  c.residual_multiplier = get_number(j, "residual_multiplier", 1.0, origin);
  c.attention_scale = get_number(j, "attention_multiplier", 1.0, origin);
  c.logits_divisor = get_number(j, "logits_scaling", 1.0, origin);
  if (!(c.attention_scale > 0) || c.logits_divisor == 0)
    fail(origin, "'attention_multiplier' must be positive and 'logits_scaling' non-zero");
}

// What Gemma 2 and 3 share: (1 + w) norms around both blocks, embeddings
// times sqrt(C) in the activation dtype, query_pre_attn_scalar, soft-caps,
// and sliding layers from layer_types (default: every `pattern`-th layer global).
void configure_gemma_common(const json& j, ModelConfig& c, const std::string& origin, int64_t pattern,
                            double default_attn_softcap, double default_final_softcap) {
  read_biases(j, c, origin, false);
  c.norm_style = RmsNormStyle::unit_offset;
  c.norm_placement = NormPlacement::sandwich;
  c.embedding_multiplier = std::sqrt(static_cast<double>(c.hidden_size));
  c.round_embedding_multiplier = true;
  const double scalar = get_number(j, "query_pre_attn_scalar", 256, origin);
  if (!(scalar > 0)) fail(origin, "'query_pre_attn_scalar' must be positive");
  c.attention_scale = std::pow(scalar, -0.5);
  c.attn_logit_softcap = get_number(j, "attn_logit_softcapping", default_attn_softcap, origin);
  c.final_logit_softcap = get_number(j, "final_logit_softcapping", default_final_softcap, origin);
  if (c.attn_logit_softcap < 0 || c.final_logit_softcap < 0) fail(origin, "soft-capping values must be positive");
  if (get_bool(j, "use_bidirectional_attention", false, origin))
    fail(origin, "'use_bidirectional_attention' true is not supported (ftcore's decoder is causal)");
  const int64_t window = get_int(j, "sliding_window", 4096, origin);
  if (has(j, "layer_types")) {
    windows_from_layer_types(j.at("layer_types"), window, c, origin);
  } else {
    for (int64_t i = 0; i < c.num_layers; ++i) c.layer_windows[i] = (i + 1) % pattern != 0 ? window : 0;
  }
}

void configure_gemma2(const json& j, ModelConfig& c, const std::string& origin) {
  configure_gemma_common(j, c, origin, 2, 50.0, 30.0);
}

// Gemma 3 adds per-head q/k norms and a RoPE per layer type: rope_parameters
// {"full_attention": {...}, "sliding_attention": {...}} (transformers 5), or
// rope_theta + rope_scaling for global layers and rope_local_base_freq for
// sliding ones (4.x).
void configure_gemma3(const json& j, ModelConfig& c, const std::string& origin) {
  const int64_t pattern = get_int(j, "sliding_window_pattern", 6, origin);
  if (pattern <= 0) fail(origin, "'sliding_window_pattern' must be positive");
  configure_gemma_common(j, c, origin, pattern, 0.0, 0.0);
  c.qk_norm = QkNorm::per_head;
  const bool by_type = has(j, "rope_parameters") && j.at("rope_parameters").is_object() &&
                       (j.at("rope_parameters").contains("full_attention") ||
                        j.at("rope_parameters").contains("sliding_attention"));
  if (by_type) {
    const json& p = j.at("rope_parameters");
    auto part = [&](const char* type, double theta) {
      const std::string where = origin + ": 'rope_parameters." + type + "'";
      return parse_rope_object(has(p, type) ? &p.at(type) : nullptr, j, c, theta, where);
    };
    c.rope = part("full_attention", 1000000.0);
    c.sliding_rope = part("sliding_attention", 10000.0);
  } else {
    c.sliding_rope = parse_rope_object(nullptr, j, c, get_number(j, "rope_local_base_freq", 10000.0, origin), origin);
  }
}

// Phi-3/4: fused projections; longrope and partial rotary come through the RoPE parser.
void configure_phi3(const json& j, ModelConfig& c, const std::string& origin) {
  c.fused_qkv = c.fused_gate_up = true;
  if (has(j, "sliding_window"))
    std::fill(c.layer_windows.begin(), c.layer_windows.end(), required_window(j, origin));
}

}  // namespace

const std::vector<ModelFamily>& all_families() {
  // architecture, model_type, kv heads default to heads, head_dim required, max positions, rope theta,
  // tied embeddings, activation key, activation, configure
  static const std::vector<ModelFamily> families = {
      {"LlamaForCausalLM", "llama", true, false, 2048, 10000.0, false, "hidden_act", "silu", configure_llama},
      {"MistralForCausalLM", "mistral", false, false, 4096 * 32, 10000.0, false, "hidden_act", "silu", configure_mistral},
      {"MixtralForCausalLM", "mixtral", false, false, 4096 * 32, 1e6, false, "hidden_act", "silu", configure_mixtral},
      {"Qwen2ForCausalLM", "qwen2", false, false, 32768, 10000.0, false, "hidden_act", "silu", configure_qwen2},
      {"Qwen3ForCausalLM", "qwen3", true, true, 32768, 10000.0, false, "hidden_act", "silu", configure_qwen3},
      {"Qwen3MoeForCausalLM", "qwen3_moe", false, false, 32768, 10000.0, false, "hidden_act", "silu",
       configure_qwen3_moe},
      {"SmolLM3ForCausalLM", "smollm3", false, false, 32768, 2000000.0, true, "hidden_act", "silu", configure_smollm3},
      {"Olmo2ForCausalLM", "olmo2", true, false, 2048, 10000.0, false, "hidden_act", "silu", configure_olmo2},
      {"GraniteForCausalLM", "granite", true, false, 2048, 10000.0, false, "hidden_act", "silu", configure_granite},
      {"Gemma2ForCausalLM", "gemma2", false, true, 8192, 10000.0, true, "hidden_activation", "gelu_pytorch_tanh",
       configure_gemma2},
      {"Gemma3ForCausalLM", "gemma3_text", false, true, 131072, 1000000.0, true, "hidden_activation",
       "gelu_pytorch_tanh", configure_gemma3},
      {"Phi3ForCausalLM", "phi3", true, false, 4096, 10000.0, false, "hidden_act", "silu", configure_phi3},
  };
  return families;
}

const ModelFamily* find_family(const std::string& architecture) {
  for (const auto& f : all_families())
    if (architecture == f.architecture) return &f;
  return nullptr;
}

}  // namespace ftcore::families

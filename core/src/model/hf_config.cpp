// config.json and generation_config.json of an HF model folder -> ModelConfig
// and GenerationConfig (model_config.h). Defaults are transformers' config
// class defaults for the keys those classes default; keys that define the
// network's shape are required. Every error names the file and the key.
#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ftcore/model_config.h"

namespace ftcore {

namespace {

using nlohmann::json;

const std::vector<std::string> kArchitectures = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                                                 "MixtralForCausalLM"};

std::string model_type_of(const std::string& architecture) {
  if (architecture == "LlamaForCausalLM") return "llama";
  if (architecture == "MistralForCausalLM") return "mistral";
  if (architecture == "MixtralForCausalLM") return "mixtral";
  return "qwen2";
}

[[noreturn]] void fail(const std::string& origin, const std::string& message) {
  throw ModelError(origin + ": " + message);
}

json parse_json(const std::string& text, const std::string& origin) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) fail(origin, "expected a JSON object");
    return j;
  } catch (const json::exception& e) {
    fail(origin, std::string("invalid JSON: ") + e.what());
  }
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ModelError(path.string() + ": cannot read the file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool has(const json& j, const char* key) { return j.contains(key) && !j.at(key).is_null(); }

int64_t get_int(const json& j, const char* key, const std::string& origin) {
  if (!has(j, key)) fail(origin, std::string("missing required key '") + key + "'");
  const json& v = j.at(key);
  if (!v.is_number_integer()) fail(origin, std::string("'") + key + "' must be an integer, got " + v.dump());
  return v.get<int64_t>();
}
int64_t get_int(const json& j, const char* key, int64_t fallback, const std::string& origin) {
  return has(j, key) ? get_int(j, key, origin) : fallback;
}
double get_number(const json& j, const char* key, double fallback, const std::string& origin) {
  if (!has(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_number()) fail(origin, std::string("'") + key + "' must be a number, got " + v.dump());
  return v.get<double>();
}
bool get_bool(const json& j, const char* key, bool fallback, const std::string& origin) {
  if (!has(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_boolean()) fail(origin, std::string("'") + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}
std::string get_string(const json& j, const char* key, const std::string& fallback, const std::string& origin) {
  if (!has(j, key)) return fallback;
  const json& v = j.at(key);
  if (!v.is_string()) fail(origin, std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}
std::optional<int64_t> get_optional_int(const json& j, const char* key, const std::string& origin) {
  if (!has(j, key)) return std::nullopt;
  return get_int(j, key, origin);
}
// eos_token_id is an int or a list of ints.
std::vector<int64_t> get_id_list(const json& j, const char* key, const std::string& origin) {
  if (!has(j, key)) return {};
  const json& v = j.at(key);
  if (v.is_number_integer()) return {v.get<int64_t>()};
  std::vector<int64_t> ids;
  if (v.is_array()) {
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(origin, std::string("'") + key + "' must hold integers, got " + v.dump());
      ids.push_back(e.get<int64_t>());
    }
    return ids;
  }
  fail(origin, std::string("'") + key + "' must be an integer or a list of integers, got " + v.dump());
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// `rope_parameters` (transformers 5) or `rope_scaling` (4.x), plus a top-level rope_theta.
RopeConfig parse_rope(const json& j, const ModelConfig& c, const std::string& origin) {
  RopeConfig r;
  r.theta = get_number(j, "rope_theta", 10000.0, origin);
  const char* key = has(j, "rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (!has(j, key)) return r;
  const json& p = j.at(key);
  if (!p.is_object()) fail(origin, std::string("'") + key + "' must be an object, got " + p.dump());
  const std::string where = origin + ": '" + key + "'";
  if (has(p, "rope_theta")) r.theta = get_number(p, "rope_theta", r.theta, where);
  r.type = get_string(p, "rope_type", get_string(p, "type", "default", where), where);
  double partial = get_number(p, "partial_rotary_factor", get_number(j, "partial_rotary_factor", 1.0, origin), where);
  if (partial != 1.0) fail(where, "partial_rotary_factor " + std::to_string(partial) + " is not supported (supported: 1.0)");
  auto factor = [&]() {
    if (!has(p, "factor")) fail(where, "rope type '" + r.type + "' needs 'factor'");
    double f = get_number(p, "factor", 1.0, where);
    if (!(f >= 1.0)) fail(where, "'factor' must be >= 1, got " + std::to_string(f));
    return f;
  };
  if (r.type == "default") return r;
  if (r.type == "linear" || r.type == "dynamic") {
    r.factor = factor();
    return r;
  }
  if (r.type == "llama3") {
    r.factor = factor();
    if (!has(p, "low_freq_factor") || !has(p, "high_freq_factor"))
      fail(where, "rope type 'llama3' needs 'low_freq_factor' and 'high_freq_factor'");
    r.low_freq_factor = get_number(p, "low_freq_factor", 1.0, where);
    r.high_freq_factor = get_number(p, "high_freq_factor", 4.0, where);
    if (!(r.high_freq_factor > r.low_freq_factor))
      fail(where, "'high_freq_factor' must exceed 'low_freq_factor'");
    r.original_max_position_embeddings =
        get_int(p, "original_max_position_embeddings", c.max_position_embeddings, where);
    return r;
  }
  fail(where, "rope type '" + r.type + "' is not supported (supported: default, linear, dynamic, llama3)");
}

// Mistral: every layer slides when sliding_window is set. Qwen2: only with
// use_sliding_window, on the layers layer_types (or max_window_layers) names.
std::vector<int64_t> parse_windows(const json& j, const ModelConfig& c, const std::string& origin) {
  std::vector<int64_t> windows(c.num_layers, 0);
  if (c.model_type == "mistral" || c.model_type == "mixtral") {
    int64_t w = get_int(j, "sliding_window", 0, origin);
    for (auto& x : windows) x = w;
  } else if (c.model_type == "qwen2" && get_bool(j, "use_sliding_window", false, origin)) {
    int64_t w = get_int(j, "sliding_window", 4096, origin);
    int64_t first = get_int(j, "max_window_layers", 28, origin);
    for (int64_t i = 0; i < c.num_layers; ++i) windows[i] = i >= first ? w : 0;
    if (has(j, "layer_types")) {
      const json& types = j.at("layer_types");
      if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers)
        fail(origin, "'layer_types' must list one type per layer (" + std::to_string(c.num_layers) + ")");
      for (int64_t i = 0; i < c.num_layers; ++i) {
        std::string t = types[i].is_string() ? types[i].get<std::string>() : types[i].dump();
        if (t != "full_attention" && t != "sliding_attention")
          fail(origin, "layer_types[" + std::to_string(i) + "] '" + t + "' is not supported (supported: full_attention, sliding_attention)");
        windows[i] = t == "sliding_attention" ? w : 0;
      }
    }
  }
  for (int64_t w : windows)
    if (w < 0) fail(origin, "'sliding_window' must be positive, got " + std::to_string(w));
  return windows;
}

// MixtralConfig's experts: num_local_experts of intermediate_size each, top
// num_experts_per_tok, renormalised, in every layer.
void parse_moe(const json& j, ModelConfig& c, const std::string& origin) {
  c.num_experts = get_int(j, "num_local_experts", 8, origin);
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", 2, origin);
  c.moe_intermediate_size = c.intermediate_size;
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = get_number(j, "router_aux_loss_coef", 0.001, origin);
  c.output_router_logits = get_bool(j, "output_router_logits", false, origin);
  c.sparse_layers.assign(c.num_layers, true);
  if (c.num_experts <= 0) fail(origin, "'num_local_experts' must be positive, got " + std::to_string(c.num_experts));
  if (c.num_experts_per_tok <= 0 || c.num_experts_per_tok > c.num_experts)
    fail(origin, "'num_experts_per_tok' must be in 1.." + std::to_string(c.num_experts) + ", got " +
                     std::to_string(c.num_experts_per_tok));
  // Jitter multiplies the router's input by uniform noise in training; not built.
  const double jitter = get_number(j, "router_jitter_noise", 0.0, origin);
  if (jitter != 0.0)
    fail(origin, "'router_jitter_noise' " + std::to_string(jitter) + " is not supported (supported: 0)");
}

}  // namespace

c10::ScalarType parse_dtype_name(const std::string& name) {
  if (name == "float32" || name == "fp32") return c10::kFloat;
  if (name == "bfloat16" || name == "bf16") return c10::kBFloat16;
  if (name == "float16" || name == "fp16") return c10::kHalf;
  throw ModelError("unsupported dtype '" + name + "' (supported: float32, bfloat16, float16)");
}

std::string dtype_display_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "fp32";
    case c10::kBFloat16: return "bf16";
    case c10::kHalf: return "fp16";
    default: return c10::toString(dtype);
  }
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  const json j = parse_json(json_text, origin);
  ModelConfig c;
  if (!has(j, "architectures") || !j.at("architectures").is_array() || j.at("architectures").empty())
    fail(origin, "missing 'architectures' (supported: " + join(kArchitectures) + ")");
  const json& arch = j.at("architectures");
  if (arch.size() != 1 || !arch[0].is_string())
    fail(origin, "'architectures' must name one architecture, got " + arch.dump());
  c.architecture = arch[0].get<std::string>();
  if (std::find(kArchitectures.begin(), kArchitectures.end(), c.architecture) == kArchitectures.end())
    fail(origin, "unsupported architecture '" + c.architecture + "' (supported: " + join(kArchitectures) + ")");
  c.model_type = model_type_of(c.architecture);
  std::string declared_type = get_string(j, "model_type", c.model_type, origin);
  if (declared_type != c.model_type)
    fail(origin, "model_type '" + declared_type + "' does not match architecture '" + c.architecture + "'");

  c.vocab_size = get_int(j, "vocab_size", origin);
  c.hidden_size = get_int(j, "hidden_size", origin);
  c.intermediate_size = get_int(j, "intermediate_size", origin);
  c.num_layers = get_int(j, "num_hidden_layers", origin);
  c.num_heads = get_int(j, "num_attention_heads", origin);
  // Only LlamaConfig defaults the kv heads to the query heads; the others' defaults are model-specific.
  c.num_kv_heads = c.model_type == "llama" ? get_int(j, "num_key_value_heads", c.num_heads, origin)
                                           : get_int(j, "num_key_value_heads", origin);
  for (auto [name, value] : {std::pair{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                             {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_layers},
                             {"num_attention_heads", c.num_heads}, {"num_key_value_heads", c.num_kv_heads}})
    if (value <= 0) fail(origin, std::string("'") + name + "' must be positive, got " + std::to_string(value));
  if (c.num_heads % c.num_kv_heads != 0)
    fail(origin, "num_attention_heads (" + std::to_string(c.num_heads) + ") must be a multiple of num_key_value_heads (" +
                     std::to_string(c.num_kv_heads) + ")");
  c.head_dim = get_int(j, "head_dim", c.hidden_size / c.num_heads, origin);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    fail(origin, "'head_dim' must be positive and even, got " + std::to_string(c.head_dim));
  if (!has(j, "head_dim") && c.hidden_size % c.num_heads != 0)
    fail(origin, "hidden_size must be a multiple of num_attention_heads when head_dim is not given");
  const int64_t default_max_positions =
      c.model_type == "llama" ? 2048 : c.model_type == "mistral" || c.model_type == "mixtral" ? 4096 * 32 : 32768;
  c.max_position_embeddings = get_int(j, "max_position_embeddings", default_max_positions, origin);
  c.rms_norm_eps = get_number(j, "rms_norm_eps", 1e-6, origin);
  std::string act = get_string(j, "hidden_act", "silu", origin);
  if (act != "silu") fail(origin, "hidden_act '" + act + "' is not supported (supported: silu)");
  c.rope = parse_rope(j, c, origin);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false, origin);
  if (c.model_type == "llama") {
    c.qkv_bias = c.o_bias = get_bool(j, "attention_bias", false, origin);
    c.mlp_bias = get_bool(j, "mlp_bias", false, origin);
  } else if (c.model_type == "qwen2") {
    c.qkv_bias = true;  // Qwen2Attention: q/k/v always carry a bias, o_proj never
  }
  c.layer_windows = parse_windows(j, c, origin);
  if (c.model_type == "mixtral") parse_moe(j, c, origin);
  // transformers 5 writes `dtype`, 4.x `torch_dtype`.
  std::string dtype = get_string(j, "dtype", get_string(j, "torch_dtype", "", origin), origin);
  if (!dtype.empty() && dtype != "auto") {
    try {
      c.dtype = parse_dtype_name(dtype);
    } catch (const ModelError& e) {
      fail(origin, e.what());
    }
  }
  c.bos_token_id = get_optional_int(j, "bos_token_id", origin);
  c.pad_token_id = get_optional_int(j, "pad_token_id", origin);
  c.eos_token_ids = get_id_list(j, "eos_token_id", origin);
  return c;
}

ModelConfig read_model_config(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "config.json";
  if (!std::filesystem::is_directory(model_dir))
    throw ModelError(model_dir.string() + ": not a folder (expected an HF model folder with config.json)");
  if (!std::filesystem::exists(path)) throw ModelError(path.string() + ": missing (expected an HF model folder)");
  return parse_model_config(read_text(path), path.string());
}

GenerationConfig parse_generation_config(const std::string& json_text, const std::string& origin,
                                         const ModelConfig& model) {
  const json j = parse_json(json_text, origin);
  GenerationConfig g;
  g.do_sample = get_bool(j, "do_sample", false, origin);
  g.temperature = get_number(j, "temperature", 1.0, origin);
  g.top_k = get_int(j, "top_k", 50, origin);
  g.top_p = get_number(j, "top_p", 1.0, origin);
  g.max_new_tokens = get_optional_int(j, "max_new_tokens", origin);
  g.bos_token_id = has(j, "bos_token_id") ? get_optional_int(j, "bos_token_id", origin) : model.bos_token_id;
  g.pad_token_id = has(j, "pad_token_id") ? get_optional_int(j, "pad_token_id", origin) : model.pad_token_id;
  g.eos_token_ids = has(j, "eos_token_id") ? get_id_list(j, "eos_token_id", origin) : model.eos_token_ids;
  return g;
}

GenerationConfig read_generation_config(const std::filesystem::path& model_dir, const ModelConfig& model) {
  const auto path = model_dir / "generation_config.json";
  if (!std::filesystem::exists(path)) {
    GenerationConfig g;
    g.bos_token_id = model.bos_token_id;
    g.pad_token_id = model.pad_token_id;
    g.eos_token_ids = model.eos_token_ids;
    return g;
  }
  return parse_generation_config(read_text(path), path.string(), model);
}

}  // namespace ftcore

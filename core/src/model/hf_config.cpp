// config.json and generation_config.json of an HF model folder -> ModelConfig
// and GenerationConfig (model_config.h): the keys every family shares and
// RoPE here, each family's own keys in model_families.cpp. Defaults are
// transformers' config class defaults for the keys those classes default;
// keys that define the network's shape are required. Every error names the
// file and the key.
#include <cmath>

#include "config_json.h"
#include "ftcore/model_config.h"
#include "model_families.h"

namespace ftcore {

using namespace config_json;

namespace families {

RopeConfig parse_rope_object(const json* rope, const json& top, const ModelConfig& c, double theta,
                             const std::string& where) {
  RopeConfig r;
  r.theta = theta;
  r.partial_rotary_factor = get_number(top, "partial_rotary_factor", 1.0, where);
  if (rope) {
    const json& p = *rope;
    if (!p.is_object()) fail(where, "must be an object, got " + p.dump());
    r.theta = get_number(p, "rope_theta", r.theta, where);
    r.partial_rotary_factor = get_number(p, "partial_rotary_factor", r.partial_rotary_factor, where);
    r.type = get_string(p, "rope_type", get_string(p, "type", "default", where), where);
  }
  if (!(r.partial_rotary_factor > 0.0 && r.partial_rotary_factor <= 1.0))
    fail(where, "'partial_rotary_factor' must be in (0, 1], got " + std::to_string(r.partial_rotary_factor));
  if (!rope || r.type == "default") return r;
  const json& p = *rope;
  if (r.type == "su") r.type = "longrope";  // Phi-3's first name for it
  auto factor = [&]() {
    if (!has(p, "factor")) fail(where, "rope type '" + r.type + "' needs 'factor'");
    double f = get_number(p, "factor", 1.0, where);
    if (!(f >= 1.0)) fail(where, "'factor' must be >= 1, got " + std::to_string(f));
    return f;
  };
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
  if (r.type == "longrope") {
    r.short_factor = get_number_list(p, "short_factor", where);
    r.long_factor = get_number_list(p, "long_factor", where);
    if (!has(p, "original_max_position_embeddings") && !has(top, "original_max_position_embeddings"))
      fail(where, "rope type 'longrope' needs 'original_max_position_embeddings'");
    r.original_max_position_embeddings = has(p, "original_max_position_embeddings")
                                             ? get_int(p, "original_max_position_embeddings", where)
                                             : get_int(top, "original_max_position_embeddings", where);
    if (r.original_max_position_embeddings <= 1) fail(where, "'original_max_position_embeddings' must exceed 1");
    // The paper's attention scaling unless the config gives one; without a
    // factor Phi-3 takes it from the two context lengths, as transformers does.
    r.factor = has(p, "factor") ? get_number(p, "factor", 1.0, where)
                                : static_cast<double>(c.max_position_embeddings) /
                                      static_cast<double>(r.original_max_position_embeddings);
    const double log_context = std::log(static_cast<double>(r.original_max_position_embeddings));
    r.attention_factor = has(p, "attention_factor") ? get_number(p, "attention_factor", 1.0, where)
                         : r.factor <= 1.0          ? 1.0
                                                    : std::sqrt(1.0 + std::log(r.factor) / log_context);
    return r;
  }
  fail(where, "rope type '" + r.type + "' is not supported (supported: default, linear, dynamic, llama3, longrope)");
}

}  // namespace families

namespace {

// `rope_parameters` (transformers 5) or `rope_scaling` (4.x), plus a top-level rope_theta.
RopeConfig parse_rope(const json& j, const ModelConfig& c, double default_theta, const std::string& origin) {
  const double theta = get_number(j, "rope_theta", default_theta, origin);
  const char* key = has(j, "rope_parameters") ? "rope_parameters" : "rope_scaling";
  return families::parse_rope_object(has(j, key) ? &j.at(key) : nullptr, j, c, theta, origin + ": '" + key + "'");
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

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& f : families::all_families()) names.push_back(f.architecture);
  return names;
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  const json j = parse_json(json_text, origin);
  ModelConfig c;
  const std::string supported = join(supported_architectures());
  if (!has(j, "architectures") || !j.at("architectures").is_array() || j.at("architectures").empty())
    fail(origin, "missing 'architectures' (supported: " + supported + ")");
  const json& arch = j.at("architectures");
  if (arch.size() != 1 || !arch[0].is_string())
    fail(origin, "'architectures' must name one architecture, got " + arch.dump());
  c.architecture = arch[0].get<std::string>();
  const families::ModelFamily* family = families::find_family(c.architecture);
  if (!family) fail(origin, "unsupported architecture '" + c.architecture + "' (supported: " + supported + ")");
  c.model_type = family->model_type;
  std::string declared_type = get_string(j, "model_type", c.model_type, origin);
  if (declared_type != c.model_type)
    fail(origin, "model_type '" + declared_type + "' does not match architecture '" + c.architecture + "'");

  c.vocab_size = get_int(j, "vocab_size", origin);
  c.hidden_size = get_int(j, "hidden_size", origin);
  c.intermediate_size = get_int(j, "intermediate_size", origin);
  c.num_layers = get_int(j, "num_hidden_layers", origin);
  c.num_heads = get_int(j, "num_attention_heads", origin);
  c.num_kv_heads = family->kv_heads_default_to_heads ? get_int(j, "num_key_value_heads", c.num_heads, origin)
                                                     : get_int(j, "num_key_value_heads", origin);
  for (auto [name, value] : {std::pair{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                             {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_layers},
                             {"num_attention_heads", c.num_heads}, {"num_key_value_heads", c.num_kv_heads}})
    if (value <= 0) fail(origin, std::string("'") + name + "' must be positive, got " + std::to_string(value));
  if (c.num_heads % c.num_kv_heads != 0)
    fail(origin, "num_attention_heads (" + std::to_string(c.num_heads) + ") must be a multiple of num_key_value_heads (" +
                     std::to_string(c.num_kv_heads) + ")");
  c.head_dim = family->head_dim_required ? get_int(j, "head_dim", origin)
                                         : get_int(j, "head_dim", c.hidden_size / c.num_heads, origin);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0)
    fail(origin, "'head_dim' must be positive and even, got " + std::to_string(c.head_dim));
  if (!has(j, "head_dim") && c.hidden_size % c.num_heads != 0)
    fail(origin, "hidden_size must be a multiple of num_attention_heads when head_dim is not given");
  c.max_position_embeddings = get_int(j, "max_position_embeddings", family->default_max_positions, origin);
  c.rms_norm_eps = get_number(j, "rms_norm_eps", 1e-6, origin);
  c.hidden_act = get_string(j, family->activation_key, family->default_activation, origin);
  c.rope = parse_rope(j, c, family->default_rope_theta, origin);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", family->default_tied_embeddings, origin);
  c.layer_windows.assign(c.num_layers, 0);
  family->configure(j, c, origin);
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh")
    fail(origin, std::string("'") + family->activation_key + "' " + c.hidden_act +
                     " is not supported (supported: silu, gelu_pytorch_tanh)");
  for (int64_t w : c.layer_windows)
    if (w < 0) fail(origin, "'sliding_window' must be positive, got " + std::to_string(w));
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

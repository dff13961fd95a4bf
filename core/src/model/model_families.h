// The architectures ftcore loads, each a config.json mapping onto the one
// decoder (model_layers.h): the config-class defaults the common keys need and
// a function that reads the family's own keys into ModelConfig's switches.
// Adding a family = one entry in model_families.cpp (plus, when it needs a
// piece no family has yet, that piece in the decoder behind a new switch).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ftcore/model_config.h"

namespace ftcore::families {

using nlohmann::json;

struct ModelFamily {
  const char* architecture;  // config.json "architectures"[0]
  const char* model_type;    // config.json "model_type"
  // The config class's defaults for keys config.json may omit.
  bool kv_heads_default_to_heads;  // num_key_value_heads = num_attention_heads when absent (else required)
  bool head_dim_required;          // the class default is not hidden_size / heads, so absent = error
  int64_t default_max_positions;
  double default_rope_theta;
  bool default_tied_embeddings;
  const char* activation_key;      // "hidden_act", Gemma's "hidden_activation"
  const char* default_activation;
  // Reads the family's own keys (biases, windows, norms, multipliers ...)
  // after the common ones are in `c`; throws ModelError naming `origin` and the key.
  void (*configure)(const json& j, ModelConfig& c, const std::string& origin);
};

const std::vector<ModelFamily>& all_families();
const ModelFamily* find_family(const std::string& architecture);  // null when unsupported

// RoPE from one rope_parameters / rope_scaling object (`p`, may be null =
// default rope) with `theta` where it names none; `top` supplies the keys
// 4.x configs kept at top level (partial_rotary_factor,
// original_max_position_embeddings). Defined in hf_config.cpp.
RopeConfig parse_rope_object(const json* p, const json& top, const ModelConfig& c, double theta,
                             const std::string& where);

}  // namespace ftcore::families

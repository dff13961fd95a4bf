// Which modules adapter/lora touches, decided by PEFT's rules (peft 0.21,
// tuners_utils.check_target_module_exists and utils.other._set_trainable) on
// HF module paths such as "model.layers.3.self_attn.q_proj":
//
//  - exclude_modules: a path equal to a name or ending with "." + name is never adapted;
//  - a path matching a modules_to_save name as a whole dotted segment run
//    (regex "(^|.*\.)NAME($|\..*)") is never adapted either;
//  - target_regex: adapted when the regex matches the whole path;
//  - target_modules ["all-linear"]: every Linear slot but the output layer (lm_head)
//    among those PEFT can address (peft_addressable_slots);
//  - target_modules names: a path equal to a name is adapted; a path ending
//    with "." + name is adapted when its layer index (the first numbered
//    segment, "model.layers.N.") is in layers_to_transform (or that is empty);
//  - modules_to_save: a module whose path ends with a name (plain suffix) is trained in full;
//  - target_parameters (tuners_utils._inject_parameters): a parameter whose
//    HF name equals a name or ends with "." + name is adapted in place
//    (lora_parameter.h). On an MoE model all-linear follows PEFT's
//    transformers v4 -> v5 conversion (utils/transformers_weight_conversion.py):
//    v4's Linear router and experts (gate, w1/w3, w2; Qwen-MoE: gate,
//    gate_proj/up_proj, down_proj) become target_parameters gate.weight,
//    gate_up_proj (w1 + w3 fused: rank 2r, alpha 2 alpha) and down_proj, and
//    those names leave target_modules, so all-linear keeps only the
//    attention projections among the Linear slots (a dense MLP of an MoE
//    model is not adapted, as in PEFT: peft_addressable_slots).
//
// Unlike PEFT, every target_modules / exclude_modules / modules_to_save name
// must match something: a typo is an error listing what exists, not a
// silently smaller adapter.
#pragma once

#include <string>
#include <vector>

#include "lora_config.h"

namespace ftcore::plugins::lora {

struct LoraTargets {
  std::vector<std::string> paths;        // slots to wrap, in the model's slot order
  std::vector<std::string> short_names;  // their last path components, first-seen order
};

// `linear_paths`: the model's Linear slots PEFT can address (peft_addressable_slots);
// `num_layers`: its decoder layers. Throws
// std::invalid_argument with the reason and what exists. With target_modules
// empty (target_parameters only) no slot is selected.
LoraTargets select_lora_targets(const std::vector<std::string>& linear_paths, int64_t num_layers,
                                const LoraOptions& options);

struct ParameterTarget {
  std::string path;  // HF parameter name, "model.layers.0.mlp.experts.gate_up_proj"
  int64_t r = 0;
  double alpha = 0;
};

// `parameter_paths`: the model's adaptable parameters, in its order. Every
// target_parameters name must match one; throws std::invalid_argument.
std::vector<ParameterTarget> select_parameter_targets(const std::vector<std::string>& parameter_paths,
                                                      const LoraOptions& options);

struct SaveTargets {
  std::vector<std::string> slots;    // Linear slots replaced by a trainable copy
  std::vector<std::string> modules;  // other modules (embed_tokens, norms) whose parameters train in place
};

// `param_names`: the model's named parameters before apply().
SaveTargets select_modules_to_save(const std::vector<std::string>& linear_paths,
                                   const std::vector<std::string>& param_names, const LoraOptions& options);

// The Linear slots PEFT can address on a model of `architecture`. PEFT 0.21
// on transformers 5 reads a Qwen3-MoE's MLP projection names (gate_proj,
// up_proj, down_proj) as its fused experts' parameters for every way of
// targeting (names, full paths, regexes, all-linear; peft/utils/
// transformers_weight_conversion.py, _MOE_TARGET_MODULE_MAPPING "qwen2_moe"),
// so the dense MLP layers of such a model (mlp_only_layers,
// decoder_sparse_step) are never adapted there: all-linear leaves them out
// here too, and targets that name one are refused (PEFT would load such an
// adapter onto the experts instead). Other architectures: `linear_paths` as given.
std::vector<std::string> peft_addressable_slots(const std::string& architecture,
                                                const std::vector<std::string>& linear_paths,
                                                const LoraOptions& options);

// The index N of "....<segment>.N....", PEFT's default layer pattern; -1 when none.
int64_t layer_index_of(const std::string& path);

}  // namespace ftcore::plugins::lora

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
//  - modules_to_save: a module whose path ends with a name (plain suffix) is trained in full.
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

// `linear_paths`: the model's Linear slots; `num_layers`: its decoder layers.
// Throws std::invalid_argument with the reason and what exists.
LoraTargets select_lora_targets(const std::vector<std::string>& linear_paths, int64_t num_layers,
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

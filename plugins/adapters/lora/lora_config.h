// adapter/lora's options: the ParamSpec the recipe is validated against, the
// typed LoraOptions built from it, and their PEFT spelling (LoraConfig's
// adapter_config.json) in both directions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ftcore/sdk/params.h"

namespace ftcore::plugins::lora {

enum class LoraInit { Kaiming, Gaussian };

struct LoraOptions {
  int64_t r = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  std::vector<std::string> target_modules = {"q_proj", "v_proj"};  // or {"all-linear"}; empty: target_parameters only
  std::vector<std::string> target_parameters;                     // PEFT's target_parameters (lora_parameter.h)
  // gate_up_proj at rank 2r / alpha 2 alpha (PEFT's fused w1 + w3 pattern): set
  // from lora_model_dir's adapter_config.json when it has that pattern; all-linear
  // on an MoE model implies it.
  bool gate_up_at_double_rank = false;
  std::string target_regex;                                       // non-empty: used instead of target_modules
  std::vector<std::string> exclude_modules;
  std::vector<int64_t> layers_to_transform;
  std::vector<std::string> modules_to_save;
  bool fan_in_fan_out = false;
  LoraInit init = LoraInit::Kaiming;
  bool use_rslora = false;
  bool use_dora = false;  // DoRA's magnitude vector on every adapted slot
  std::string lora_model_dir;

  // alpha / r, or alpha / sqrt(r) with rsLoRA.
  double scaling() const;
  bool all_linear() const;  // target_modules == ["all-linear"] (any case)
};

sdk::ParamSpec lora_param_spec();
// Throws sdk::OptionError for dropout, DoRA or layers_to_transform with parameter targets (PEFT refuses the first two).
void check_parameter_lora_options(const LoraOptions& options);

// Throws sdk::OptionError for values or combinations PEFT refuses too.
LoraOptions lora_options_from(const sdk::Options& options);

// What apply() resolved on the model, for adapter_config.json.
struct ResolvedTargets {
  std::vector<std::string> module_names;     // target_modules' short names (all-linear expanded)
  std::vector<std::string> parameter_names;  // target_parameters (all-linear: PEFT's MoE names)
  bool fused_gate_up = false;  // all-linear on an MoE model: gate_up_proj at rank 2r, alpha 2 alpha (lora_targets.h)
};

// adapter_config.json for PeftModel.from_pretrained (target_modules: the
// short names unless a regex is used; fused_gate_up writes PEFT's
// rank_pattern / alpha_pattern for gate_up_proj).
std::string peft_config_json(const LoraOptions& options, const ResolvedTargets& targets);

// PEFT's rank_pattern / alpha_pattern key for the fused experts' gate_up_proj.
extern const char* const kFusedGateUpPattern;

// Compares the scaling-defining fields of a PEFT adapter_config.json (r,
// lora_alpha, use_rslora, use_dora; no rank/alpha patterns but PEFT's fused
// gate_up_proj one; target_parameters unless all-linear) with `options`; throws
// std::runtime_error naming the file, the field and both values. Returns
// whether the file has PEFT's fused gate_up_proj rank/alpha pattern.
bool check_peft_config_compatible(const std::string& config_file, const LoraOptions& options);

}  // namespace ftcore::plugins::lora

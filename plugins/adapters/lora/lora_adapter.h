// adapter/lora: LoRA (Hu et al., https://arxiv.org/abs/2106.09685) with
// rsLoRA scaling (Kalajdzievski, https://arxiv.org/abs/2312.03732) and DoRA
// (Liu et al., https://arxiv.org/abs/2402.09353), saved and
// loaded in HF PEFT's format so either side reads the other's adapters.
//
//   apply():  each targeted Linear slot becomes a LoraLinear (lora_linear.h)
//             around the frozen base; modules_to_save become trainable
//             copies (Linear slots) or train in place (embeddings, norms).
//             One param group "lora": every A, B (DoRA: and m) and
//             modules_to_save tensor, named as Model::named_parameters() names them.
//   save():   "base_model.model.<path>.lora_A.weight" [r, in] and
//             ".lora_B.weight" [out, r] (fp32), DoRA's ".lora_magnitude_vector"
//             [out] (fp32, no ".weight"), "base_model.model.<module>.weight"
//             for modules_to_save: get_peft_model_state_dict's names.
//   load():   the same names; every tensor must be there with its shape, and
//             nothing else may be.
//   merge():  each LoraLinear slot becomes a dense Linear holding
//             W + scaling * B A (DoRA: each row rescaled to m / ||row||)
//             (PEFT's merge_and_unload).
//
// target_parameters (MoE routers and expert stacks, lora_parameter.h) are
// adapted in place through sdk::ModelView's parameter transforms, saved as
// PEFT's nested ParamWrappers name them: on a module with n targeted
// parameters the i-th (registration order: gate_up_proj, then down_proj)
// sits under n-1-i "base_layer." levels, e.g.
// "base_model.model.model.layers.0.mlp.experts.base_layer.lora_A.weight"
// (gate_up_proj) and "...mlp.experts.lora_A.weight" (down_proj); merge()
// folds the delta into the parameter itself.
//
// Initialisation draws from torch's default CPU generator exactly as PEFT's
// LoraLayer.update_layer does (nn.Linear's own init of A and B, then
// reset_lora_parameters), so the same seed gives PEFT's A bit for bit; with
// a bf16/fp16 base, A is rounded to that dtype and kept in fp32, as PEFT's
// cast to the base dtype and back (autocast_adapter_dtype) leaves it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ftcore/sdk/adapter.h"
#include "lora_config.h"
#include "lora_linear.h"
#include "lora_parameter.h"
#include "lora_targets.h"

namespace ftcore::plugins::lora {

class LoraAdapter : public sdk::Adapter, public sdk::BaseWeightUse {
 public:
  // Throws std::invalid_argument / std::runtime_error for a bad lora_model_dir.
  explicit LoraAdapter(LoraOptions options);

  std::vector<sdk::ParamGroupSpec> apply(sdk::ModelView& model) override;
  sdk::TensorMap save() const override;
  std::string peft_config_json() const override;
  void load(const sdk::TensorMap& weights) override;
  void merge(sdk::ModelView& model) override;
  std::string initial_weights_dir() const override { return options_.lora_model_dir; }
  // Plain LoRA reaches the base only through its forward; DoRA reads ||W|| in every forward.
  bool uses_base_weights_after_apply() const override { return options_.use_dora; }

 protected:
  size_t adapted_parameter_count() const { return wrapped_parameters_.size(); }

 private:
  struct Wrapped {
    std::string path;
    std::shared_ptr<LoraLinear> module;
  };
  void check_state(const char* what) const;
  // (PEFT file name, tensor) for everything save() writes and load() reads.
  std::vector<std::pair<std::string, at::Tensor>> adapter_tensors() const;

  LoraOptions options_;
  LoraTargets targets_;
  std::vector<Wrapped> wrapped_;
  struct WrappedParameter {
    std::string path;         // HF parameter name
    std::string peft_module;  // the module path PEFT saves its factors under (see above)
    std::shared_ptr<ParameterLora> module;
  };
  std::vector<WrappedParameter> wrapped_parameters_;
  bool moe_all_linear_ = false;  // all-linear resolved on an MoE model (PEFT's fused gate_up_proj pattern)
  std::vector<sdk::NamedParameter> full_params_;  // modules_to_save, by HF parameter name
  bool applied_ = false;
  bool merged_ = false;
};

}  // namespace ftcore::plugins::lora

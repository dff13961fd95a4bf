// adapter/lora_plus (lora_plus_adapter.h): the loraplus_* options and PEFT
// 0.21's create_loraplus_optimizer grouping over adapter/lora's tensors.
#include "lora_plus_adapter.h"

#include <stdexcept>

#include <c10/util/Exception.h>

#include "ftcore/sdk/option_error.h"
#include "ftcore/sdk/option_fields.h"

namespace ftcore::plugins::lora {

sdk::ParamSpec lora_plus_param_spec() {
  sdk::ParamSpec s = lora_param_spec();
  s.add_float("loraplus_lr_ratio", std::nullopt)
      .make_required()
      .above(0.0)
      .with_doc("lr of the B matrices (and of 1-D tensors: DoRA's magnitudes, trained norms and biases) = this x the "
                "optimizer's lr, which the A matrices get; the LoRA+ paper suggests 16 (PEFT's loraplus_lr_ratio).");
  s.add_float("loraplus_lr_embedding", 1e-6)
      .above(0.0)
      .with_doc("PEFT's absolute lr for LoRA on embedding layers. adapter/lora adapts Linear slots only (embeddings "
                "train in full through modules_to_save, with the A group), so it has no effect; accepted for "
                "PEFT/Axolotl recipes.");
  s.add_float("loraplus_weight_decay", 0.0)
      .at_least(0.0)
      .with_doc("Weight decay of the A and B groups (biases get none), replacing the optimizer's weight_decay "
                "for every adapter tensor, as PEFT's create_loraplus_optimizer does (its default is 0 too).");
  return s;
}

LoraPlusOptions lora_plus_options_from(const sdk::Options& options) {
  using O = LoraPlusOptions;
  const O o = sdk::read_fields<O>(options, {{"loraplus_lr_ratio", &O::lr_ratio},
                                            {"loraplus_lr_embedding", &O::lr_embedding},
                                            {"loraplus_weight_decay", &O::weight_decay}});
  if (!(o.lr_ratio > 0.0)) throw sdk::OptionError("loraplus_lr_ratio must be > 0");
  if (options.is_set_by_user("loraplus_lr_embedding"))
    TORCH_WARN(
        "adapter/lora_plus: loraplus_lr_embedding has no effect: it sets the lr of LoRA on embedding layers, "
        "and adapter/lora adapts Linear slots only (modules_to_save embeddings train with the A group, as in "
        "PEFT)");
  return o;
}

std::vector<sdk::ParamGroupSpec> lora_plus_param_groups(const std::vector<sdk::NamedParameter>& params,
                                                        const LoraPlusOptions& options) {
  sdk::ParamGroupSpec a, b, b_no_decay;
  a.name = "groupA";
  a.lr_scale = 1.0;
  a.weight_decay = options.weight_decay;
  b.name = "groupB";
  b.lr_scale = options.lr_ratio;
  b.weight_decay = options.weight_decay;
  b_no_decay.name = "groupB_no_decay";
  b_no_decay.lr_scale = options.lr_ratio;
  b_no_decay.weight_decay = 0.0;
  for (const auto& p : params) {
    // PEFT tests the name for "lora_B" and the tensor for one dimension;
    // its decay rule then exempts names holding "bias".
    if (p.name.find("lora_B") != std::string::npos || p.tensor.dim() == 1)
      (p.name.find("bias") != std::string::npos ? b_no_decay : b).params.push_back(p);
    else
      a.params.push_back(p);
  }
  std::vector<sdk::ParamGroupSpec> out;
  for (auto* g : {&a, &b, &b_no_decay})
    if (!g->params.empty()) out.push_back(std::move(*g));
  return out;
}

std::vector<sdk::ParamGroupSpec> LoraPlusAdapter::apply(sdk::ModelView& model) {
  std::vector<sdk::NamedParameter> params;
  for (auto& group : LoraAdapter::apply(model))
    for (auto& p : group.params) params.push_back(std::move(p));
  return lora_plus_param_groups(params, plus_);
}

}  // namespace ftcore::plugins::lora

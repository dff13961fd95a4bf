// adapter/lora_plus: LoRA+ (Hayou, Ghosh, Yu, "LoRA+: Efficient Low Rank
// Adaptation of Large Models", https://arxiv.org/abs/2402.12354): adapter/lora
// (every option, DoRA and rsLoRA included) trained with a larger learning
// rate for the B matrices than for the A matrices,
//
//   lr_B = loraplus_lr_ratio x lr_A,   lr_A = the optimizer's lr (x schedule)
//
// The paper's argument: with B = 0 at init and a width-independent lr, A and
// B cannot both learn efficiently; B needs a rate larger by a factor that
// grows with the width (it suggests ~16).
//
// Nothing changes in the model or the saved adapter (PEFT has no LoRA+
// config: the adapter is a plain LoRA / DoRA one). Only the param groups do,
// exactly as PEFT 0.21's create_loraplus_optimizer forms them, by name and
// shape of each trainable tensor:
//
//   groupB           "lora_B" in the name, or 1-D (DoRA's m, norm weights and
//                    biases of modules_to_save), unless a bias:
//                    lr_scale = ratio, weight_decay = loraplus_weight_decay
//   groupB_no_decay  those of groupB whose name holds "bias" (PEFT's decay
//                    rule; it also exempts nn.LayerNorm parameters, which
//                    ftcore's RMSNorm models do not have): lr_scale = ratio, weight_decay = 0
//   groupA           everything else (A matrices, 2-D modules_to_save weights):
//                    lr_scale = 1, weight_decay = loraplus_weight_decay
//   embedding        LoRA on embedding layers (lr = loraplus_lr_embedding).
//                    adapter/lora adapts Linear slots only, so this group is
//                    always empty; the option is accepted for PEFT/Axolotl
//                    recipes and warns when set.
//
// Every group sets its weight decay (PEFT's loraplus_weight_decay, default 0),
// so the trainer's 1-D no-decay split leaves them as they are and the
// optimizer's own weight_decay does not apply, as in PEFT. Empty groups are
// left out.
#pragma once

#include <vector>

#include "lora_adapter.h"

namespace ftcore::plugins::lora {

struct LoraPlusOptions {
  double lr_ratio = 16.0;     // loraplus_lr_ratio (required in recipes)
  double lr_embedding = 1e-6;  // loraplus_lr_embedding (no effect, see above)
  double weight_decay = 0.0;   // loraplus_weight_decay
};

// adapter/lora's ParamSpec plus the loraplus_* keys.
sdk::ParamSpec lora_plus_param_spec();
// Warns when loraplus_lr_embedding is set (it has nothing to act on).
LoraPlusOptions lora_plus_options_from(const sdk::Options& options);

// PEFT's LoRA+ grouping of adapter/lora's trainable tensors (above).
std::vector<sdk::ParamGroupSpec> lora_plus_param_groups(const std::vector<sdk::NamedParameter>& params,
                                                        const LoraPlusOptions& options);

class LoraPlusAdapter : public LoraAdapter {
 public:
  LoraPlusAdapter(LoraOptions lora, LoraPlusOptions plus) : LoraAdapter(std::move(lora)), plus_(plus) {}

  std::vector<sdk::ParamGroupSpec> apply(sdk::ModelView& model) override;

 private:
  LoraPlusOptions plus_;
};

}  // namespace ftcore::plugins::lora

// The trainer's weight-decay split of the param groups an adapter returns,
// shared so tests can build the optimizer exactly as `ftcore run` does
// (core/src/train/run_training.cpp applies the same rule).
#pragma once

#include <utility>
#include <vector>

#include "ftcore/sdk/optimizer.h"

namespace ftcore {

// Weight decay applies to tensors of two or more dimensions (matrices,
// embeddings); biases and norm weights go to a group of their own,
// "<name>.no_decay", without it, as HF Trainer's get_decay_parameter_names
// does. A group that sets its own weight_decay is kept whole: its author
// decided (LoRA+ follows PEFT's name-based rule that way).
inline std::vector<sdk::ParamGroupSpec> split_no_decay(std::vector<sdk::ParamGroupSpec> groups) {
  std::vector<sdk::ParamGroupSpec> out;
  for (auto& g : groups) {
    sdk::ParamGroupSpec no_decay;
    no_decay.name = g.name + ".no_decay";
    no_decay.lr_scale = g.lr_scale;
    no_decay.weight_decay = 0.0;
    sdk::ParamGroupSpec decay = g;
    decay.params.clear();
    for (auto& p : g.params) (p.tensor.dim() >= 2 || g.weight_decay ? decay : no_decay).params.push_back(p);
    if (!decay.params.empty()) out.push_back(std::move(decay));
    if (!no_decay.params.empty()) out.push_back(std::move(no_decay));
  }
  return out;
}

}  // namespace ftcore

// The adam and lion families' shared recipe keys (family_params.h).
#include "family_params.h"

namespace ftcore::plugins::blockwise8 {

void add_adam_family_params(sdk::ParamSpec& s) {
  s.add_float("lr", 1e-3).above(0.0).with_doc("Base learning rate (scaled per group by lr_scale and the scheduler).");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.999})
      .with_range(0.0, 1.0, false, true)
      .with_doc("Decay rates of the first and second moment estimates.");
  s.add_float("eps", 1e-8).above(0.0).with_doc("Added to the denominator for numerical stability.");
}

void add_lion_family_params(sdk::ParamSpec& s) {
  s.add_float("lr", 1e-4)
      .above(0.0)
      .with_doc(
          "Base learning rate (scaled per group by lr_scale and the scheduler); Lion wants 3-10x less than AdamW.");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.99})
      .with_range(0.0, 1.0)
      .with_doc("beta1 interpolates the update direction, beta2 decays the momentum.");
  s.add_float("weight_decay", 0.0)
      .at_least(0.0)
      .with_doc("Decoupled weight decay, p *= 1 - lr * weight_decay (groups may override).");
}

}  // namespace ftcore::plugins::blockwise8

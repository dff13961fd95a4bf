// optimizer/adamw's recipe keys and their typed options.
#include "adamw_options.h"

namespace ftcore::plugins::adamw {

sdk::ParamSpec adamw_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-3).above(0.0).with_doc("Base learning rate (scaled per group by lr_scale and the scheduler).");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.999})
      .with_range(0.0, 1.0, false, true)
      .with_doc("Decay rates of the first and second moment estimates.");
  s.add_float("eps", 1e-8).above(0.0).with_doc("Added to the denominator for numerical stability.");
  s.add_float("weight_decay", 0.01).at_least(0.0).with_doc("Decoupled weight decay (groups may override).");
  s.add_bool("amsgrad", false).with_doc("Use the running maximum of the second moment (AMSGrad).");
  return s;
}

AdamWOptions adamw_options_from(const sdk::Options& options) {
  AdamWOptions o;
  o.lr = options.get_float("lr");
  o.betas = options.get_pair("betas");
  o.eps = options.get_float("eps");
  o.weight_decay = options.get_float("weight_decay");
  o.amsgrad = options.get_bool("amsgrad");
  return o;
}

}  // namespace ftcore::plugins::adamw

// optimizer/adamw's recipe keys and their typed options.
#include "adamw_options.h"

#include "family_params.h"
#include "ftcore/sdk/option_fields.h"

namespace ftcore::plugins::adamw {

sdk::ParamSpec adamw_param_spec() {
  sdk::ParamSpec s;
  blockwise8::add_adam_family_params(s);  // lr, betas, eps
  s.add_float("weight_decay", 0.01).at_least(0.0).with_doc("Decoupled weight decay (groups may override).");
  s.add_bool("amsgrad", false).with_doc("Use the running maximum of the second moment (AMSGrad).");
  return s;
}

AdamWOptions adamw_options_from(const sdk::Options& options) {
  using O = AdamWOptions;
  return sdk::read_fields<O>(options, {{"lr", &O::lr}, {"betas", &O::betas}, {"eps", &O::eps},
                                       {"weight_decay", &O::weight_decay}, {"amsgrad", &O::amsgrad}});
}

}  // namespace ftcore::plugins::adamw

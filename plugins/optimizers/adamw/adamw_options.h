// optimizer/adamw's options and their recipe keys, shared with
// optimizer/paged_adamw_32bit (which links this library, ftcore_adamw_kernel).
#pragma once

#include <utility>

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/options_with_lr.h"
#include "ftcore/sdk/params.h"

namespace ftcore::plugins::adamw {

struct AdamWOptions : public sdk::OptionsWithLr<AdamWOptions> {
  AdamWOptions() : OptionsWithLr(1e-3) {}
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
  bool amsgrad = false;
};

sdk::ParamSpec adamw_param_spec();
AdamWOptions adamw_options_from(const sdk::Options& options);

}  // namespace ftcore::plugins::adamw

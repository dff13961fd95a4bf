// optimizer/lion: Lion, the sign-momentum optimizer of Chen et al. 2023
// (https://arxiv.org/abs/2302.06675), as the lion-pytorch package defines it,
// through a fused multi-tensor kernel (lion_kernel.h has the update rule).
//
// Options and defaults are lion-pytorch's: lr 1e-4, betas (0.9, 0.99),
// weight_decay 0 (decoupled: p *= 1 - lr*wd), decoupled_weight_decay false
// (when true, wd is divided by the initial lr, so the decay no longer
// follows the schedule).
//
// State per parameter: exp_avg only, always fp32 (4 bytes per parameter;
// lion-pytorch keeps it in the parameter's dtype), saved as "<name>.exp_avg".
#pragma once

#include <utility>
#include <vector>

#include "ftcore/sdk/options_with_lr.h"
#include "ftcore/sdk/params.h"
#include "ftcore/sdk/slot_optimizer.h"

namespace ftcore::plugins::lion {

struct LionOptions : public sdk::OptionsWithLr<LionOptions> {
  LionOptions() : OptionsWithLr(1e-4) {}
  std::pair<double, double> betas = {0.9, 0.99};
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;
};

sdk::ParamSpec lion_param_spec();
LionOptions lion_options_from(const sdk::Options& options);

class Lion : public sdk::SlotOptimizer {
 public:
  Lion(const std::vector<sdk::ParamGroupSpec>& groups, const LionOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  LionOptions options_;
};

}  // namespace ftcore::plugins::lion

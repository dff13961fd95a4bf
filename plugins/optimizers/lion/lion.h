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

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/params.h"

namespace ftcore::plugins::lion {

struct LionOptions : public torch::optim::OptimizerCloneableOptions<LionOptions> {
  double lr = 1e-4;
  std::pair<double, double> betas = {0.9, 0.99};
  double weight_decay = 0.0;
  bool decoupled_weight_decay = false;

  double get_lr() const override { return lr; }
  void set_lr(const double value) override { lr = value; }
};

sdk::ParamSpec lion_param_spec();
LionOptions lion_options_from(const sdk::Options& options);

class Lion : public sdk::Optimizer {
 public:
  Lion(const std::vector<sdk::ParamGroupSpec>& groups, const LionOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;
  std::string name() const override { return "lion"; }
  std::string family() const override { return "lion"; }
  sdk::TensorMap state_by_name() const override;
  void load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) override;

 private:
  at::Tensor& exp_avg_for(size_t group, size_t index);

  LionOptions options_;
  std::vector<std::vector<at::Tensor>> exp_avg_;  // [group][param]; undefined until first stepped
};

}  // namespace ftcore::plugins::lion

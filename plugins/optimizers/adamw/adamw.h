// optimizer/adamw: Adam with decoupled weight decay, optional AMSGrad, as
// torch.optim.AdamW defines it, through a fused multi-tensor kernel
// (adamw_kernel.h has the update rule and the paper).
//
// State per parameter, always fp32 whatever the parameter dtype:
//   step (int64), exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only);
// saved by parameter name as "<name>.step", "<name>.exp_avg", ...
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/params.h"

namespace ftcore::plugins::adamw {

struct AdamWOptions : public torch::optim::OptimizerCloneableOptions<AdamWOptions> {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
  bool amsgrad = false;

  double get_lr() const override { return lr; }
  void set_lr(const double value) override { lr = value; }
};

sdk::ParamSpec adamw_param_spec();
AdamWOptions adamw_options_from(const sdk::Options& options);

class AdamW : public sdk::Optimizer {
 public:
  AdamW(const std::vector<sdk::ParamGroupSpec>& groups, const AdamWOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;
  std::string name() const override { return "adamw"; }
  std::string family() const override { return "adam"; }
  sdk::TensorMap state_by_name() const override;
  void load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) override;

 private:
  struct ParamState {
    int64_t step = 0;
    at::Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
  };
  ParamState& state_for(size_t group, size_t index);

  AdamWOptions options_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
};

}  // namespace ftcore::plugins::adamw

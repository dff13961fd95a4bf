// optimizer/adamw: Adam with decoupled weight decay, optional AMSGrad, as
// torch.optim.AdamW defines it, through a fused multi-tensor kernel
// (adamw_kernel.h has the update rule and the paper; options in adamw_options.h).
//
// State per parameter, always fp32 whatever the parameter dtype:
//   step (int64), exp_avg, exp_avg_sq, max_exp_avg_sq (amsgrad only);
// saved by parameter name as "<name>.step", "<name>.exp_avg", ...
#pragma once

#include <vector>

#include "adamw_options.h"
#include "ftcore/sdk/slot_optimizer.h"

namespace ftcore::plugins::adamw {

class AdamW : public sdk::SlotOptimizer {
 public:
  AdamW(const std::vector<sdk::ParamGroupSpec>& groups, const AdamWOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;
  sdk::TensorMap state_by_name() const override;

 private:
  AdamWOptions options_;
};

}  // namespace ftcore::plugins::adamw

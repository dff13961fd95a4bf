// optimizer/lion_8bit: Lion (Chen et al. 2023, "Symbolic Discovery of
// Optimization Algorithms", https://arxiv.org/abs/2302.06675) with its
// momentum kept as 8-bit blockwise-quantized state, as
// bitsandbytes.optim.Lion8bit computes it (Dettmers et al. 2022, "8-bit
// Optimizers via Block-wise Quantization", https://arxiv.org/abs/2110.02861),
// through a fused multi-tensor kernel (blockwise8/optim8bit_kernel.h):
//   p <- p * (1 - lr*wd)
//   p <- p - lr * sign(beta1*m + (1-beta1)*g)
//   m <- beta2*m + (1-beta2)*g
// with m dequantized before and requantized after, per block of 256
// elements (absmax per block, bitsandbytes' signed dynamic map).
//
// Options are bitsandbytes' (lr 1e-4, betas (0.9, 0.99), weight_decay 0,
// min_8bit_size 4096: smaller tensors keep fp32 state and bitsandbytes'
// 32-bit update), plus percentile_clipping (100 = off; bitsandbytes <= 0.49's
// rule) and block_wise (must be true).
//
// State per parameter (family "lion"; converts from/to optimizer/lion's):
//   "<name>.step" int64; 8-bit "<name>.exp_avg.q8" (uint8, the parameter's
//   shape) and "<name>.exp_avg.absmax" (fp32 [ceil(numel/256)]): 1 + 4/256
//   bytes per parameter; below min_8bit_size "<name>.exp_avg" fp32; with
//   clipping "<name>.gnorm_vec" fp32[100].
#pragma once

#include <utility>
#include <vector>

#include "ftcore/sdk/options_with_lr.h"
#include "ftcore/sdk/params.h"
#include "optimizer_8bit.h"
#include "options_8bit.h"

namespace ftcore::plugins::lion_8bit {

struct Lion8bitOptions : public sdk::OptionsWithLr<Lion8bitOptions>, public blockwise8::State8bitOptions {
  explicit Lion8bitOptions(blockwise8::State8bitOptions state = {}) : OptionsWithLr(1e-4), State8bitOptions(state) {}
  std::pair<double, double> betas = {0.9, 0.99};
  double weight_decay = 0.0;
};

sdk::ParamSpec lion_8bit_param_spec();
Lion8bitOptions lion_8bit_options_from(const sdk::Options& options);

class Lion8bit : public blockwise8::SlotOptimizer8bit {
 public:
  Lion8bit(const std::vector<sdk::ParamGroupSpec>& groups, const Lion8bitOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  Lion8bitOptions options_;
};

}  // namespace ftcore::plugins::lion_8bit

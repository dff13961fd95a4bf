// optimizer/adamw_8bit: AdamW with 8-bit blockwise-quantized state, as
// bitsandbytes.optim.AdamW8bit computes it (Dettmers et al. 2022, "8-bit
// Optimizers via Block-wise Quantization", https://arxiv.org/abs/2110.02861),
// through a fused multi-tensor kernel (blockwise8/optim8bit_kernel.h has the
// update rule and its order of roundings):
//   m <- beta1*m + (1-beta1)*g;  v <- beta2*v + (1-beta2)*g^2
//   p <- p*(1 - lr*wd) - lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps)
// with m and v dequantized from 8 bits before and requantized after, per
// block of 256 elements (absmax per block, bitsandbytes' dynamic maps:
// signed for m, unsigned for v).
//
// Options (blockwise8/options_8bit.h) are bitsandbytes' (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
// weight_decay 0.01 as torch's AdamW and ours, min_8bit_size 4096: smaller
// tensors keep fp32 state and bitsandbytes' 32-bit update), plus
// percentile_clipping (100 = off; bitsandbytes <= 0.49's rule: the gradient
// is scaled down to the given percentile of its last 100 norms) and
// block_wise (must be true: only blockwise quantization is implemented).
//
// State per parameter (family "adam"; converts from/to optimizer/adamw's):
//   "<name>.step" int64; 8-bit: "<name>.exp_avg.q8", "<name>.exp_avg_sq.q8"
//   (uint8, the parameter's shape) and "<name>.exp_avg.absmax",
//   "<name>.exp_avg_sq.absmax" (fp32 [ceil(numel/256)]): 2 + 8/256 bytes per
//   parameter; below min_8bit_size "<name>.exp_avg", "<name>.exp_avg_sq" fp32;
//   with clipping "<name>.gnorm_vec" fp32[100].
#pragma once

#include <vector>

#include "optimizer_8bit.h"
#include "options_8bit.h"

namespace ftcore::plugins::adamw_8bit {

class AdamW8bit : public blockwise8::SlotOptimizer8bit {
 public:
  AdamW8bit(const std::vector<sdk::ParamGroupSpec>& groups, const AdamW8bitOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  AdamW8bitOptions options_;
};

}  // namespace ftcore::plugins::adamw_8bit

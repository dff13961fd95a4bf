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
// Options are bitsandbytes' (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
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

#include <utility>
#include <vector>

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/params.h"

namespace ftcore::plugins::adamw_8bit {

struct AdamW8bitOptions : public torch::optim::OptimizerCloneableOptions<AdamW8bitOptions> {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
  int64_t min_8bit_size = 4096;
  int64_t percentile_clipping = 100;

  double get_lr() const override { return lr; }
  void set_lr(const double value) override { lr = value; }
};

sdk::ParamSpec adamw_8bit_param_spec();
AdamW8bitOptions adamw_8bit_options_from(const sdk::Options& options);

class AdamW8bit : public sdk::Optimizer {
 public:
  AdamW8bit(const std::vector<sdk::ParamGroupSpec>& groups, const AdamW8bitOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;
  std::string name() const override { return "adamw_8bit"; }
  std::string family() const override { return "adam"; }
  sdk::TensorMap state_by_name() const override;
  void load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) override;

 private:
  struct ParamState {
    int64_t step = 0;
    at::Tensor q1, q2, absmax1, absmax2;  // 8-bit state (defined when eight_bit)
    at::Tensor m32, v32;                  // fp32 state (small tensors)
    at::Tensor gnorm_vec;                 // fp32[100] with percentile clipping
    bool started() const { return q1.defined() || m32.defined(); }
  };
  ParamState& state_for(size_t group, size_t index);
  bool eight_bit(const at::Tensor& p) const { return p.numel() >= options_.min_8bit_size; }

  AdamW8bitOptions options_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
  at::Tensor device_maps_;                      // [2, 256] signed, unsigned on the CUDA device in use
};

}  // namespace ftcore::plugins::adamw_8bit

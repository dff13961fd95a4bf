// optimizer/paged_adamw_8bit: optimizer/adamw_8bit (bitsandbytes' AdamW8bit:
// blockwise 8-bit state, min_8bit_size, percentile clipping; the same fused
// kernel, bit for bit) with its state paged as paged_adamw.h describes, as
// bitsandbytes' PagedAdamW8bit does (Dettmers et al., QLoRA, 2023, "Paged
// Optimizers": https://arxiv.org/abs/2305.14314).
//
// Pages hold, per tensor, the codes of exp_avg and exp_avg_sq (uint8) and
// their absmax (fp32 per 256 elements), or fp32 exp_avg/exp_avg_sq for
// tensors below min_8bit_size; a tensor split across pages is cut on
// 256-element quantization blocks, so every block is requantized exactly as
// unpaged. Percentile clipping's 100-float history per tensor stays in memory.
//
// State by name is exactly adamw_8bit's ("<name>.exp_avg.q8",
// "<name>.exp_avg.absmax", ..., family "adam"): it converts to and from
// adamw, adamw_8bit and paged_adamw_32bit.
#pragma once

#include <cstdint>
#include <vector>

#include "options_8bit.h"
#include "paged_optimizer.h"

namespace ftcore::plugins::paged_adamw {

sdk::ParamSpec paged_adamw_8bit_param_spec();

class PagedAdamW8bit : public PagedOptimizer {
 public:
  PagedAdamW8bit(const std::vector<sdk::ParamGroupSpec>& groups, const adamw_8bit::AdamW8bitOptions& options,
                 const PagingOptions& paging);

  at::Tensor step(LossClosure closure = nullptr) override;
  std::string name() const override { return "paged_adamw_8bit"; }
  std::string family() const override { return "adam"; }
  void load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) override;

 private:
  // Slots: 8-bit codes and absmax of m and v, or fp32 m and v (small tensors).
  enum Slot : size_t { kCodes1 = 0, kCodes2 = 1, kAbsmax1 = 2, kAbsmax2 = 3, kExpAvg32 = 4, kExpAvgSq32 = 5 };
  bool eight_bit(size_t t) const { return param(t).numel() >= options_.min_8bit_size; }
  std::vector<int64_t> slot_elements(size_t t) const override;
  void save_tensor(sdk::TensorMap& out, size_t t) const override;
  void load_tensor(const sdk::TensorMap& state, size_t t) override;
  void step_cpu(const std::vector<char>& has_grad);
  void step_cuda(const std::vector<char>& has_grad);

  adamw_8bit::AdamW8bitOptions options_;
  std::vector<at::Tensor> gnorm_vec_;  // per tensor, fp32[100] with percentile clipping
  std::vector<float> gnorm_scale_;     // this step's, per tensor
  at::Tensor device_maps_;             // [2, 256] signed, unsigned on the CUDA device (CUDA only)
};

}  // namespace ftcore::plugins::paged_adamw

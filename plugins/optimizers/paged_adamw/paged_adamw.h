// optimizer/paged_adamw_32bit: AdamW (optimizer/adamw's update, its fused
// kernel from ftcore_adamw_kernel, bit for bit) whose state lives in pages moved between memory and a
// backing store as a step needs them, as bitsandbytes' PagedAdamW32bit does
// (Dettmers et al., QLoRA, 2023, "Paged Optimizers":
// https://arxiv.org/abs/2305.14314).
//
// CPU parameters: the state is in a file under the run folder (or a
// temporary folder), at most `max_resident_bytes` of it in memory at a time
// (page_store.h has the layout and the budget invariant). CUDA parameters:
// the state is in CUDA managed memory, prefetched to the device before each
// tensor's update and back to the host when the device-resident state passes
// the budget (managed_state.h); that branch is compiled only with the
// ftcore_cuda_kernels library.
//
// State by name is exactly optimizer/adamw's ("<name>.step", "<name>.exp_avg",
// "<name>.exp_avg_sq", "<name>.max_exp_avg_sq" with amsgrad; family "adam"), so
// checkpoints move between adamw, the 8-bit optimizers and the paged ones.
#pragma once

#include <vector>

#include "adamw_kernel.h"
#include "adamw_options.h"
#include "paged_optimizer.h"

namespace ftcore::plugins::paged_adamw {

sdk::ParamSpec paged_adamw_32bit_param_spec();

class PagedAdamW : public PagedOptimizer {
 public:
  PagedAdamW(const std::vector<sdk::ParamGroupSpec>& groups, const adamw::AdamWOptions& options,
             const PagingOptions& paging);

  at::Tensor step(LossClosure closure = nullptr) override;
  std::string name() const override { return "paged_adamw_32bit"; }
  std::string family() const override { return "adam"; }
  sdk::TensorMap state_by_name() const override;

 private:
  enum Slot : size_t { kExpAvg = 0, kExpAvgSq = 1, kMaxExpAvgSq = 2 };
  std::vector<int64_t> slot_elements(size_t t) const override;
  void save_tensor(sdk::TensorMap& out, size_t t) const override;
  void load_tensor(const sdk::TensorMap& state, size_t t) override;
  void step_cpu(const std::vector<adamw::AdamWScalars>& scalars, const std::vector<char>& has_grad);
  void step_cuda(const std::vector<char>& has_grad);

  adamw::AdamWOptions options_;
};

}  // namespace ftcore::plugins::paged_adamw

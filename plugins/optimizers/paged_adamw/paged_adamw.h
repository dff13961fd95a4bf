// optimizer/paged_adamw_32bit: AdamW (optimizer/adamw's update, its fused
// kernel, bit for bit) whose state lives in pages moved between memory and a
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

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adamw.h"
#include "adamw_kernel.h"
#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/params.h"
#include "managed_state.h"
#include "page_store.h"

namespace ftcore::plugins::paged_adamw {

struct PagingOptions {
  int64_t max_resident_bytes = 0;  // 0: unbounded
  int64_t page_bytes = 16 << 20;
  int64_t prefetch_pages = 2;
};

// Adds max_resident_bytes, page_bytes and prefetch_pages to an optimizer's spec.
void add_paging_params(sdk::ParamSpec& spec);
PagingOptions paging_options_from(const sdk::Options& options);

sdk::ParamSpec paged_adamw_32bit_param_spec();
// Throws std::invalid_argument: a budget below one page.
void check_paging_options(const std::string& owner, const PagingOptions& paging);
// Throws std::invalid_argument naming the first parameter on another device than the rest.
void check_same_device(const sdk::Optimizer& optimizer);

// Where a step's state lives: the CPU page store, or CUDA managed memory.
// Shared by the 32-bit and 8-bit paged optimizers.
class PagedState {
 public:
  PagedState(std::string owner, std::vector<SlotFormat> slots, PagingOptions paging, int64_t align_elems)
      : owner_(std::move(owner)), slots_(std::move(slots)), paging_(paging), align_elems_(align_elems) {}
  void set_directory(const std::string& dir) { directory_ = dir; }
  // Creates the storage on first use (zeros) where the parameters are;
  // elements[t][s]: tensor t's elements in slot s (0: slot unused).
  void ensure(const std::vector<at::Tensor>& params, const std::vector<std::vector<int64_t>>& elements);
  void reset();  // drops the storage (the next ensure() starts from zeros)
  bool created() const { return store_ || managed_; }
  bool on_cuda() const { return managed_ != nullptr; }
  PageStore* store() const { return store_.get(); }
  ManagedState* managed() const { return managed_.get(); }
  uint8_t* data(size_t tensor, size_t slot) const;
  // A tensor viewing slot `slot` of tensor `tensor` in place (keeps the storage alive).
  at::Tensor view(size_t tensor, size_t slot, at::IntArrayRef sizes, at::ScalarType dtype) const;
  // After in-place writes or reads outside a step: drop what is resident (CPU, bounded).
  void release_tensor(size_t tensor);
  void release_all();
  PagingStats stats() const;
  // One line to stderr when FTCORE_PAGED_STATS=1.
  void report(int64_t step) const;

 private:
  std::string owner_;
  std::vector<SlotFormat> slots_;
  PagingOptions paging_;
  int64_t align_elems_;
  std::string directory_;
  std::unique_ptr<PageStore> store_;
  std::unique_ptr<ManagedState> managed_;
};

class PagedAdamW : public sdk::Optimizer {
 public:
  PagedAdamW(const std::vector<sdk::ParamGroupSpec>& groups, const adamw::AdamWOptions& options,
             const PagingOptions& paging);

  at::Tensor step(LossClosure closure = nullptr) override;
  std::string name() const override { return "paged_adamw_32bit"; }
  std::string family() const override { return "adam"; }
  sdk::TensorMap state_by_name() const override;
  void load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) override;
  void attach_run_folder(const std::string& dir) override { state_.set_directory(dir); }

 private:
  enum Slot : size_t { kExpAvg = 0, kExpAvgSq = 1, kMaxExpAvgSq = 2 };
  const at::Tensor& param(size_t t) const { return param_groups_[where_[t].first].params()[where_[t].second]; }
  const std::string& param_name(size_t t) const { return group_info(where_[t].first).param_names[where_[t].second]; }
  void ensure_state();
  void step_cpu(const std::vector<adamw::AdamWScalars>& scalars, const std::vector<char>& has_grad);
  void step_cuda(const std::vector<char>& has_grad);

  adamw::AdamWOptions options_;
  std::vector<std::pair<size_t, size_t>> where_;  // tensor -> (group, index)
  std::vector<int64_t> steps_;                    // per tensor; 0: never stepped
  mutable PagedState state_;
  mutable bool views_out_ = false;  // state_by_name handed out views: release before the next step
  int64_t step_count_ = 0;
};

}  // namespace ftcore::plugins::paged_adamw

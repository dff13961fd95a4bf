// What both paged optimizers share of their storage: the paging options and
// their recipe keys, and PagedState, which puts the state of a step in the
// CPU page store (page_store.h) or in CUDA managed memory (managed_state.h),
// whichever device the parameters are on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

// Throws sdk::OptionError: a budget below one page.
void check_paging_options(const std::string& owner, const PagingOptions& paging);
// Throws std::invalid_argument naming the first parameter on another device than the rest.
void check_same_device(const sdk::Optimizer& optimizer, const std::string& owner);

// Where a step's state lives: the CPU page store, or CUDA managed memory.
// Shared by the 32-bit and 8-bit paged optimizers.
class PagedState {
 public:
  PagedState(std::string owner, std::vector<SlotFormat> slots, PagingOptions paging, int64_t align_elems)
      : owner_(std::move(owner)), slots_(std::move(slots)), paging_(paging), align_elems_(align_elems) {}
  const std::string& owner() const { return owner_; }
  const PagingOptions& paging() const { return paging_; }
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

}  // namespace ftcore::plugins::paged_adamw

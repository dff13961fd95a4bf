// The paging options and PagedState (paged_state.h).
#include "paged_state.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include <ATen/ATen.h>

#include "ftcore/sdk/option_error.h"

namespace ftcore::plugins::paged_adamw {

void add_paging_params(sdk::ParamSpec& spec) {
  spec.add_int("max_resident_bytes", 0)
      .at_least(0)
      .with_doc(
          "Most bytes of optimizer state in memory at once (CPU: the rest waits in a file under the run "
          "folder; CUDA: on the host). 0: unbounded. At least page_bytes.");
  spec.add_int("page_bytes", 16 << 20)
      .at_least(64 << 10)
      .with_doc("Bytes of state per page, the unit moved in and out (tensors larger than a page are split).");
  spec.add_int("prefetch_pages", 2).at_least(0).with_doc("Pages read ahead of the one being updated.");
}

PagingOptions paging_options_from(const sdk::Options& options) {
  PagingOptions o;
  o.max_resident_bytes = options.get_int("max_resident_bytes");
  o.page_bytes = options.get_int("page_bytes");
  o.prefetch_pages = options.get_int("prefetch_pages");
  return o;
}

void PagedState::ensure(const std::vector<at::Tensor>& params, const std::vector<std::vector<int64_t>>& elements) {
  if (created()) return;
  if (!params.empty() && params.front().is_cuda()) {
    managed_ = std::make_unique<ManagedState>(slots_, elements, params.front().device().index(),
                                              paging_.max_resident_bytes, paging_.prefetch_pages, owner_);
    return;
  }
  PageStoreOptions o;
  o.page_bytes = paging_.page_bytes;
  o.max_resident_bytes = paging_.max_resident_bytes;
  o.prefetch_pages = paging_.prefetch_pages;
  o.align_elems = align_elems_;
  o.directory = directory_;
  o.file_name = owner_ + ".state";
  o.owner = owner_;
  store_ = std::make_unique<PageStore>(slots_, elements, o);
}

void PagedState::reset() {
  store_.reset();
  managed_.reset();
}

uint8_t* PagedState::data(size_t tensor, size_t slot) const {
  return managed_ ? managed_->data(tensor, slot) : store_->slot_data(tensor, slot);
}

at::Tensor PagedState::view(size_t tensor, size_t slot, at::IntArrayRef sizes, at::ScalarType dtype) const {
  std::shared_ptr<void> owner = managed_ ? managed_->owner() : store_->mapping_owner();
  auto options = at::TensorOptions().dtype(dtype);
  if (managed_) options = options.device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(managed_->device())));
  return at::from_blob(
      data(tensor, slot), sizes, [owner](void*) {}, options);
}

void PagedState::release_tensor(size_t tensor) {
  if (store_) store_->release_tensor(tensor);
}

void PagedState::release_all() {
  if (store_) store_->release_all();
}

PagingStats PagedState::stats() const {
  if (store_) return store_->stats();
  if (managed_) return managed_->stats();
  return {};
}

void PagedState::report(int64_t step) const {
  const char* env = std::getenv("FTCORE_PAGED_STATS");
  if (!env || std::string(env) != "1") return;
  const PagingStats s = stats();
  std::fprintf(
      stderr,
      "paged_stats {\"optimizer\": \"%s\", \"step\": %lld, \"max_resident_bytes\": %lld, \"page_bytes\": %lld, "
      "\"file_bytes\": %lld, \"num_pages\": %lld, \"largest_page_bytes\": %lld, \"pages_in\": %lld, "
      "\"pages_out\": %lld, \"resident_bytes\": %lld, \"resident_high_water\": %lld, "
      "\"measured_high_water\": %lld}\n",
      owner_.c_str(), static_cast<long long>(step), static_cast<long long>(paging_.max_resident_bytes),
      static_cast<long long>(paging_.page_bytes), static_cast<long long>(s.file_bytes),
      static_cast<long long>(s.num_pages), static_cast<long long>(s.largest_page_bytes),
      static_cast<long long>(s.pages_in), static_cast<long long>(s.pages_out), static_cast<long long>(s.resident_bytes),
      static_cast<long long>(s.resident_high_water), static_cast<long long>(s.measured_high_water));
}

void check_paging_options(const std::string& owner, const PagingOptions& paging) {
  if (paging.max_resident_bytes > 0 && paging.max_resident_bytes < paging.page_bytes)
    throw sdk::OptionError(owner + ": max_resident_bytes = " + std::to_string(paging.max_resident_bytes) +
                           " is smaller than page_bytes = " + std::to_string(paging.page_bytes) +
                           "; one page must fit (or set max_resident_bytes = 0 for no bound)");
}

void check_same_device(const sdk::Optimizer& optimizer, const std::string& owner) {
  std::optional<at::Device> first;
  for (size_t g = 0; g < optimizer.num_groups(); ++g) {
    const auto& params = optimizer.param_groups()[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Device d = params[i].device();
      if (!first) first = d;
      if (d != *first)
        throw std::invalid_argument(owner + ": parameter " + optimizer.group_info(g).param_names[i] + " is on " +
                                    d.str() + ", the others on " + first->str() + "; paged state lives on one device");
    }
  }
}

}  // namespace ftcore::plugins::paged_adamw

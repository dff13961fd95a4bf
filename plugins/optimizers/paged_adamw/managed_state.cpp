// CUDA managed memory for paged state (managed_state.h).
#include "managed_state.h"

#include <algorithm>
#include <stdexcept>

#if FTCORE_CUDA_KERNELS
#include "cuda_kernels.h"
#endif

namespace ftcore::plugins::paged_adamw {

#if FTCORE_CUDA_KERNELS

ManagedState::ManagedState(const std::vector<SlotFormat>& slots, const std::vector<std::vector<int64_t>>& elements, int device,
                           int64_t max_resident_bytes, int64_t prefetch_pages, const std::string& owner)
    : device_(device), max_resident_bytes_(max_resident_bytes), prefetch_pages_(prefetch_pages) {
  constexpr int64_t kAlign = 256;
  int64_t total = 0;
  for (const auto& slot_elements : elements) {
    std::vector<int64_t> offsets;
    int64_t tensor_bytes = 0;
    for (size_t s = 0; s < slots.size(); ++s) {
      offsets.push_back(total);
      const int64_t b = (slot_bytes(slots[s], slot_elements.at(s)) + kAlign - 1) / kAlign * kAlign;
      total += b;
      tensor_bytes += b;
    }
    offset_.push_back(std::move(offsets));
    bytes_.push_back(tensor_bytes);
  }
  void* p = total > 0 ? cuda::managed_alloc(static_cast<size_t>(total)) : nullptr;
  if (total > 0 && !p) throw std::runtime_error(owner + ": cannot allocate " + std::to_string(total) + " bytes of managed memory");
  memory_ = std::shared_ptr<void>(p, [](void* q) { if (q) cuda::managed_free(q); });
  base_ = static_cast<uint8_t*>(p);
  is_on_device_.assign(elements.size(), 0);
  stats_.file_bytes = total;
  stats_.num_pages = static_cast<int64_t>(elements.size());
}

void ManagedState::to_device(size_t t) {
  if (is_on_device_[t]) {
    on_device_.remove(t);
    on_device_.push_back(t);
    return;
  }
  cuda::prefetch(base_ + offset_[t].front(), static_cast<size_t>(bytes_[t]), device_, nullptr);
  is_on_device_[t] = 1;
  on_device_.push_back(t);
  stats_.resident_bytes += bytes_[t];
  stats_.resident_high_water = std::max(stats_.resident_high_water, stats_.resident_bytes);
  ++stats_.pages_in;
}

void ManagedState::prepare(const std::vector<size_t>& order, size_t position) {
  const size_t last = std::min(order.size(), position + 1 + static_cast<size_t>(prefetch_pages_));
  for (size_t i = position; i < last; ++i) to_device(order[i]);
  // Over budget: send the least recently used back to the host, never the ones just asked for.
  while (max_resident_bytes_ > 0 && stats_.resident_bytes > max_resident_bytes_ && !on_device_.empty()) {
    const size_t t = on_device_.front();
    if (std::find(order.begin() + position, order.begin() + last, t) != order.begin() + last) break;
    on_device_.pop_front();
    cuda::prefetch(base_ + offset_[t].front(), static_cast<size_t>(bytes_[t]), -1, nullptr);
    is_on_device_[t] = 0;
    stats_.resident_bytes -= bytes_[t];
    ++stats_.pages_out;
  }
}

#else

ManagedState::ManagedState(const std::vector<SlotFormat>&, const std::vector<std::vector<int64_t>>&, int device, int64_t, int64_t,
                           const std::string& owner)
    : device_(device), max_resident_bytes_(0), prefetch_pages_(0) {
  throw std::invalid_argument(owner + ": parameters are on CUDA, but this build has no CUDA kernels "
                              "(configure with FTCORE_WITH_CUDA=ON)");
}

void ManagedState::to_device(size_t) {}
void ManagedState::prepare(const std::vector<size_t>&, size_t) {}

#endif

}  // namespace ftcore::plugins::paged_adamw

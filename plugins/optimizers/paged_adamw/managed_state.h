// Paged optimizer state of CUDA parameters: one CUDA managed (unified
// memory) allocation holding every tensor's state slots, as bitsandbytes'
// paged optimizers allocate theirs. Before a tensor is updated its state is
// prefetched to the device (and the next `prefetch_pages` tensors' after
// it, so migration overlaps the update); when the state on the device passes
// `max_resident_bytes`, the least recently used tensors are prefetched back
// to the host (0: the driver migrates on demand only, bitsandbytes' behaviour).
//
// Compiled with the ftcore_cuda_kernels library (FTCORE_CUDA_KERNELS);
// without it the constructor throws. Untested here: no GPU on the build machine.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "page_store.h"

namespace ftcore::plugins::paged_adamw {

class ManagedState {
 public:
  ManagedState(const std::vector<SlotFormat>& slots, const std::vector<std::vector<int64_t>>& elements, int device,
               int64_t max_resident_bytes, int64_t prefetch_pages, const std::string& owner);
  uint8_t* data(size_t tensor, size_t slot) const { return base_ + offset_.at(tensor).at(slot); }
  std::shared_ptr<void> owner() const { return memory_; }
  int device() const { return device_; }
  // Brings order[position]'s state to the device and starts the next ones' migration.
  void prepare(const std::vector<size_t>& order, size_t position);
  PagingStats stats() const { return stats_; }

 private:
  void to_device(size_t tensor);
  std::shared_ptr<void> memory_;
  uint8_t* base_ = nullptr;
  std::vector<std::vector<int64_t>> offset_;  // [tensor][slot]
  std::vector<int64_t> bytes_;                // per tensor, all slots
  int device_;
  int64_t max_resident_bytes_, prefetch_pages_;
  std::list<size_t> on_device_;  // least recently used first
  std::vector<char> is_on_device_;
  PagingStats stats_;
};

}  // namespace ftcore::plugins::paged_adamw

// ZeRO-1 partition, parameter broadcast and state gathering (optimizer_sharding.h).
#include "optimizer_sharding.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "tensor_map_broadcast.h"

namespace ftcore::dist {

OptimizerSharding::OptimizerSharding(ProcessGroup& group, const std::vector<sdk::ParamGroupSpec>& groups)
    : group_(group), by_owner_(static_cast<size_t>(group.size())) {
  std::vector<int64_t> load(static_cast<size_t>(group.size()), 0);
  for (const sdk::ParamGroupSpec& g : groups) {
    std::vector<size_t> order(g.params.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return g.params[a].tensor.numel() > g.params[b].tensor.numel(); });
    sdk::ParamGroupSpec mine = g;
    mine.params.clear();
    for (size_t i : order) {
      const auto owner = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      const at::Tensor& t = g.params[i].tensor;
      load[owner] += t.numel();
      total_elements_ += t.numel();
      by_owner_[owner].push_back(t);
      if (static_cast<int>(owner) == group.rank()) {
        mine.params.push_back(g.params[i]);
        owned_elements_ += t.numel();
      }
    }
    if (!mine.params.empty()) owned_.push_back(std::move(mine));
  }
  for (size_t r = 0; r < by_owner_.size(); ++r)
    if (by_owner_[r].empty())
      throw std::invalid_argument("[distributed] shard_optimizer_state: rank " + std::to_string(r) +
                                  " would own no trainable tensor (" + std::to_string(group.size()) +
                                  " ranks); use fewer ranks or shard_optimizer_state = false");
}

void OptimizerSharding::broadcast_updated(int64_t step) {
  at::NoGradGuard no_grad;
  for (int owner = 0; owner < group_.size(); ++owner) {
    // One flat buffer per dtype of the owner's tensors.
    std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
    for (const at::Tensor& t : by_owner_[static_cast<size_t>(owner)]) by_dtype[t.scalar_type()].push_back(t);
    for (auto& [dtype, tensors] : by_dtype) {
      std::vector<at::Tensor> flat_views;
      for (const at::Tensor& t : tensors) flat_views.push_back(t.detach().reshape({-1}));
      at::Tensor flat = at::cat(flat_views);
      group_.broadcast(flat, owner, "the broadcast of rank " + std::to_string(owner) +
                                        "'s updated parameters at step " + std::to_string(step));
      if (owner == group_.rank()) continue;
      int64_t offset = 0;
      for (const at::Tensor& t : tensors) {
        t.detach().copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    }
  }
}

sdk::TensorMap OptimizerSharding::gather_state(const sdk::TensorMap& mine) {
  sdk::TensorMap all;
  for (int r = 0; r < group_.size(); ++r) {
    sdk::TensorMap part = broadcast_tensor_map(group_, mine, r, "rank " + std::to_string(r) + "'s optimizer state");
    if (r == 0) all.metadata = part.metadata;
    for (auto& [name, t] : part.tensors) all.add(name, std::move(t));
  }
  return all;
}

}  // namespace ftcore::dist

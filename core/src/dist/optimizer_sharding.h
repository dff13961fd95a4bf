// ZeRO-1 (Rajbhandari et al. 2020, https://arxiv.org/abs/1910.02054):
// optimizer state partitioned across ranks. Each trainable tensor has one
// owner; the recipe's optimizer plugin, unchanged, is built over the owner's
// tensors only, so every plugin (a third party's included) shards and the
// state per rank is about 1/N. Gradients are still all-reduced in full;
// after each rank steps its own tensors, every tensor takes its owner's new
// values (one broadcast per owner and dtype, from a flat buffer).
//
// Partition as torch's ZeroRedundancyOptimizer does it: within each group,
// tensors by decreasing size, each to the rank holding the fewest elements
// so far (ties to the lower rank).
//
// State stays keyed by parameter name: a checkpoint gathers every rank's
// state into one map, so a run saved with N ranks resumes with M.
#pragma once

#include <cstdint>
#include <vector>

#include "ftcore/sdk/optimizer.h"
#include "process_group.h"

namespace ftcore::dist {

class OptimizerSharding {
 public:
  OptimizerSharding(ProcessGroup& group, const std::vector<sdk::ParamGroupSpec>& groups);

  // The groups restricted to this rank's tensors (empty groups dropped), for
  // the optimizer plugin. Throws std::invalid_argument when a rank owns nothing.
  const std::vector<sdk::ParamGroupSpec>& owned_groups() const { return owned_; }
  int64_t owned_elements() const { return owned_elements_; }
  int64_t total_elements() const { return total_elements_; }

  // After this rank's optimizer step: each tensor takes its owner's values.
  void broadcast_updated(int64_t step);
  // Collective: every rank's state, merged by name (metadata of rank 0).
  sdk::TensorMap gather_state(const sdk::TensorMap& mine);

 private:
  ProcessGroup& group_;
  std::vector<std::vector<at::Tensor>> by_owner_;  // [rank] -> tensors it owns, in a fixed order
  std::vector<sdk::ParamGroupSpec> owned_;
  int64_t owned_elements_ = 0, total_elements_ = 0;
};

}  // namespace ftcore::dist

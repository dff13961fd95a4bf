// The base of both paged optimizers: what does not depend on the update.
// Parameters are one flat list of tensors (group order), each with its step
// count; the state is a PagedState; and the loops of a step's head, of
// state_by_name and of load_state_by_name are here, while a derived class
// says which slots a tensor uses and how they are saved and read back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ftcore/sdk/optimizer.h"
#include "paged_state.h"

namespace ftcore::plugins::paged_adamw {

class PagedOptimizer : public sdk::Optimizer {
 public:
  void attach_run_folder(const std::string& dir) override { state_.set_directory(dir); }
  // "<name>.step" and the derived class's slots of every stepped tensor, as
  // views of the paged state (read through, they page in).
  sdk::TensorMap state_by_name() const override;
  // Fresh zeros, then, for the same family, every saved tensor's slots.
  void load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) override;

 protected:
  // Throws sdk::OptionError for paging options that cannot hold a page, and
  // std::invalid_argument for parameters on more than one device.
  PagedOptimizer(const std::vector<sdk::ParamGroupSpec>& groups,
                 std::unique_ptr<torch::optim::OptimizerOptions> defaults, double default_weight_decay,
                 PagedState state);

  size_t num_tensors() const { return where_.size(); }
  const at::Tensor& param(size_t t) const { return param_groups_[where_[t].first].params()[where_[t].second]; }
  const std::string& param_name(size_t t) const { return group_info(where_[t].first).param_names[where_[t].second]; }
  size_t group_of(size_t t) const { return where_[t].first; }

  // The head of step(): each tensor with a gradient is checked (CPU ones as
  // the fused kernels need them), its step counted and on_grad(t) called;
  // then the state is created and what saved-state views paged in is
  // dropped. Returns which tensors have a gradient; empty when none has.
  std::vector<char> begin_step(const std::function<void(size_t)>& on_grad);
  // What a step walks. CPU: the pages holding a tensor with a gradient, in
  // order. CUDA: update(t) for each tensor with a gradient, in order, each
  // after its state was brought to the device (and the next ones' started).
  std::vector<size_t> pages_to_update(const std::vector<char>& has_grad) const;
  void for_each_tensor_on_device(const std::vector<char>& has_grad, const std::function<void(size_t)>& update);
  // The end of step(): the paging statistics line (FTCORE_PAGED_STATS=1).
  void end_step() { state_.report(++step_count_); }

  // Tensor t's elements in each slot of the state (0: slot unused).
  virtual std::vector<int64_t> slot_elements(size_t t) const = 0;
  // Adds tensor t's slots to saved state, or reads them back (its step is done).
  virtual void save_tensor(sdk::TensorMap& out, size_t t) const = 0;
  virtual void load_tensor(const sdk::TensorMap& state, size_t t) = 0;

  std::vector<int64_t> steps_;  // per tensor; 0: never stepped
  mutable PagedState state_;

 private:
  void ensure_state();

  std::vector<std::pair<size_t, size_t>> where_;  // tensor -> (group, index)
  mutable bool views_out_ = false;                // state_by_name handed out views: release before the next step
  int64_t step_count_ = 0;
};

}  // namespace ftcore::plugins::paged_adamw

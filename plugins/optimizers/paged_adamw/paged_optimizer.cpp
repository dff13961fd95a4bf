// The paged optimizers' shared loops (paged_optimizer.h).
#include "paged_optimizer.h"

#include <ATen/ATen.h>

namespace ftcore::plugins::paged_adamw {

PagedOptimizer::PagedOptimizer(const std::vector<sdk::ParamGroupSpec>& groups,
                               std::unique_ptr<torch::optim::OptimizerOptions> defaults, double default_weight_decay,
                               PagedState state)
    : sdk::Optimizer(groups, std::move(defaults), default_weight_decay), state_(std::move(state)) {
  check_paging_options(state_.owner(), state_.paging());
  check_same_device(*this, state_.owner());
  for (size_t g = 0; g < param_groups_.size(); ++g)
    for (size_t i = 0; i < param_groups_[g].params().size(); ++i) where_.emplace_back(g, i);
  steps_.assign(where_.size(), 0);
}

void PagedOptimizer::ensure_state() {
  std::vector<at::Tensor> params;
  std::vector<std::vector<int64_t>> elements;
  for (size_t t = 0; t < where_.size(); ++t) {
    params.push_back(param(t));
    elements.push_back(slot_elements(t));
  }
  state_.ensure(params, elements);
}

std::vector<char> PagedOptimizer::begin_step(const std::function<void(size_t)>& on_grad) {
  std::vector<char> has_grad(where_.size(), 0);
  bool any = false;
  for (size_t t = 0; t < where_.size(); ++t) {
    const at::Tensor& p = param(t);
    if (!p.grad().defined()) continue;
    if (!p.is_cuda()) check_fused_cpu_parameter(where_[t].first, where_[t].second);
    has_grad[t] = 1;
    any = true;
    steps_[t] += 1;
    on_grad(t);
  }
  if (!any) return {};
  ensure_state();
  if (views_out_) {  // saved-state views were read since the last step: start within the budget
    state_.release_all();
    views_out_ = false;
  }
  return has_grad;
}

std::vector<size_t> PagedOptimizer::pages_to_update(const std::vector<char>& has_grad) const {
  const PageStore& store = *state_.store();
  std::vector<char> needed(store.pages().size(), 0);
  for (size_t t = 0; t < where_.size(); ++t)
    if (has_grad[t])
      for (size_t page : store.pages_of(t)) needed[page] = 1;
  std::vector<size_t> order;
  for (size_t page = 0; page < needed.size(); ++page)
    if (needed[page]) order.push_back(page);
  return order;
}

void PagedOptimizer::for_each_tensor_on_device(const std::vector<char>& has_grad,
                                               const std::function<void(size_t)>& update) {
  std::vector<size_t> order;
  for (size_t t = 0; t < has_grad.size(); ++t)
    if (has_grad[t]) order.push_back(t);
  for (size_t i = 0; i < order.size(); ++i) {
    state_.managed()->prepare(order, i);
    update(order[i]);
  }
}

sdk::TensorMap PagedOptimizer::state_by_name() const {
  sdk::TensorMap out = new_state();
  if (!state_.created()) return out;
  for (size_t t = 0; t < where_.size(); ++t) {
    if (steps_[t] == 0) continue;  // never stepped
    out.add(param_name(t) + ".step", at::scalar_tensor(steps_[t], at::kLong));
    save_tensor(out, t);
  }
  views_out_ = true;  // whoever reads them pages them in
  return out;
}

void PagedOptimizer::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  state_.reset();  // fresh zeros, created below or at the first step
  steps_.assign(where_.size(), 0);
  if (!accept_state(state, conversion)) return;  // another family's state, and the recipe says reset
  ensure_state();
  for (size_t t = 0; t < where_.size(); ++t) {
    const at::Tensor* step = state.find(param_name(t) + ".step");
    if (!step) continue;  // a parameter that had not been stepped
    steps_[t] = step->item<int64_t>();
    load_tensor(state, t);
    state_.release_tensor(t);  // written through the mapping: back to the file, within the budget
  }
}

}  // namespace ftcore::plugins::paged_adamw

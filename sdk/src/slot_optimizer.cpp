// The slot-table optimizer base: the parameter loop of a step, lazy slots,
// and state by name (slot_optimizer.h).
#include "ftcore/sdk/slot_optimizer.h"

#include <stdexcept>

#include <ATen/ATen.h>

namespace ftcore::sdk {

StateSlot fp32_slot(std::string name) {
  StateSlot slot;
  slot.name = std::move(name);
  slot.make = [](const at::Tensor& p) { return at::zeros(p.sizes(), p.options().dtype(at::kFloat)); };
  return slot;
}

bool ParamSlots::started() const {
  for (const at::Tensor& t : slots)
    if (t.defined()) return true;
  return false;
}

SlotOptimizer::SlotOptimizer(const std::vector<ParamGroupSpec>& groups,
                             std::unique_ptr<torch::optim::OptimizerOptions> defaults, double default_weight_decay,
                             StateLayout layout)
    : Optimizer(groups, std::move(defaults), default_weight_decay), layout_(std::move(layout)) {
  ParamSlots empty;
  empty.slots.resize(layout_.slots.size());
  for (const auto& g : param_groups_) state_.emplace_back(g.params().size(), empty);
}

void SlotOptimizer::create_missing_slots(const at::Tensor& param, ParamSlots& s) const {
  c10::NoGradGuard no_grad;  // state is never part of the graph
  for (size_t k = 0; k < layout_.slots.size(); ++k)
    if (!s.slots[k].defined() && layout_.slots[k].make) s.slots[k] = layout_.slots[k].make(param);
}

void SlotOptimizer::for_each_param_with_grad(const std::function<void(const ParamRef&, ParamSlots&)>& visit) {
  size_t position = 0;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const double lr = param_groups_[g].options().get_lr();
    const double weight_decay = group_info(g).weight_decay;
    auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i, ++position) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;  // no gradient this step: its state does not move either
      check_parameter(g, i);
      ParamSlots& s = state_[g][i];
      create_missing_slots(p, s);
      s.step += 1;
      visit(ParamRef{g, i, position, group_info(g).param_names[i], p, lr, weight_decay}, s);
    }
  }
}

void SlotOptimizer::check_fused_cpu_or_cuda_parameter(size_t group, size_t index, bool cuda_kernels) const {
  if (!param_groups_.at(group).params().at(index).is_cuda()) return check_fused_cpu_parameter(group, index);
  if (!cuda_kernels)
    throw std::invalid_argument(name() + ": parameter " + group_info(group).param_names.at(index) +
                                " is on CUDA but this build has no CUDA kernels");
}

TensorMap SlotOptimizer::state_by_name() const {
  TensorMap out = new_state();
  for (size_t g = 0; g < state_.size(); ++g) {
    for (size_t i = 0; i < state_[g].size(); ++i) {
      const ParamSlots& s = state_[g][i];
      if (!s.started()) continue;  // never stepped
      const std::string& n = group_info(g).param_names[i];
      if (layout_.saves_step) out.add(n + ".step", at::scalar_tensor(s.step, at::kLong));
      for (size_t k = 0; k < layout_.slots.size(); ++k)
        if (s.slots[k].defined()) out.add(n + "." + layout_.slots[k].name, s.slots[k]);
    }
  }
  return out;
}

void SlotOptimizer::load_state_by_name(const TensorMap& state, StateConversion conversion) {
  const bool same_family = accept_state(state, conversion);  // throws before anything changes
  ParamSlots empty;
  empty.slots.resize(layout_.slots.size());
  for (auto& group : state_)
    for (auto& s : group) s = empty;
  if (!same_family) return;  // another family's state, and the recipe says reset
  for (size_t g = 0; g < state_.size(); ++g) {
    const auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& n = group_info(g).param_names[i];
      const at::Tensor& p = params[i];
      const bool stepped = layout_.was_stepped ? layout_.was_stepped(state, n) : state.find(n + ".step") != nullptr;
      if (!stepped) continue;  // a parameter that had not been stepped
      ParamSlots s = empty;
      if (const at::Tensor* step = state.find(n + ".step")) s.step = step->item<int64_t>();
      for (size_t k = 0; k < layout_.slots.size(); ++k) {
        const StateSlot& slot = layout_.slots[k];
        s.slots[k] = slot.load
                         ? slot.load(state, n, p)
                         : require_state_tensor(state, n, slot.name, p.sizes()).to(p.device(), at::kFloat).clone();
      }
      state_[g][i] = std::move(s);
    }
  }
}

}  // namespace ftcore::sdk

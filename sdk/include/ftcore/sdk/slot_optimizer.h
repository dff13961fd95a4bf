// An optimizer whose per-parameter state is a table of named slots, so that a
// plugin writes only its update: it declares the slots ("exp_avg",
// "exp_avg_sq", ...) with how each is created and read back, and this base
// does the rest that every optimizer repeats:
//   - the head of step(): the closure with grad enabled, the rest under
//     NoGradGuard (StepGuard, step_guard.h), the loop over parameters with a gradient and
//     their lr and weight decay (for_each_param_with_grad);
//   - the lazy state: a slot is created (zeros) before the parameter's first
//     update, or later when it appears (amsgrad or beta1 turned on mid-run);
//   - state_by_name: "<param>.step" then "<param>.<slot>" for every defined
//     slot, in table order; load_state_by_name: the family check, then each
//     slot read back by its own rule (converting another precision's form).
//
//   class Sgd : public sdk::SlotOptimizer {
//     Sgd(groups, options) : SlotOptimizer(groups, std::make_unique<SgdOptions>(options), options.weight_decay,
//                                          {"sgd", "sgd", {sdk::fp32_slot("momentum")}}) {}
//     at::Tensor step(LossClosure closure) override {
//       sdk::StepGuard guard(closure);
//       for_each_param_with_grad([&](const sdk::ParamRef& p, sdk::ParamSlots& s) {
//         s[0].mul_(0.9).add_(p.param.grad());
//         p.param.add_(s[0], -p.lr);
//       });
//       return guard.loss();
//     }
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/step_guard.h"

namespace ftcore::sdk {

// A parameter with a gradient, as a step visits it.
struct ParamRef {
  size_t group, index;  // param_groups()[group].params()[index]
  size_t position;      // running count over all groups, in group order
  const std::string& name;
  at::Tensor& param;
  double lr;            // the group's: base lr x lr_scale (x the scheduler)
  double weight_decay;  // the group's override or the optimizer's option
};

// One per-parameter state tensor: saved as "<param name>.<name>".
struct StateSlot {
  std::string name;
  // The slot's zeros for a parameter, or an undefined tensor when this
  // parameter has no such slot (a factored statistic of a vector, amsgrad
  // off). Called before each update while the slot is undefined. Empty: the
  // step creates it itself (a buffer that starts as the first gradient).
  std::function<at::Tensor(const at::Tensor& param)> make;
  // The slot read from saved state, or undefined to start it afresh. Empty:
  // the tensor "<param>.<name>" with the parameter's shape, in fp32 on the
  // parameter's device (require_state_tensor's checks).
  std::function<at::Tensor(const TensorMap& state, const std::string& param_name, const at::Tensor& param)> load;
};

// fp32 zeros shaped like the parameter, on its device; read back as saved.
StateSlot fp32_slot(std::string name);

// Who writes the state and what a parameter's saved state is made of.
struct StateLayout {
  std::string name;    // the optimizer's, e.g. "adamw" (Optimizer::name())
  std::string family;  // e.g. "adam": state converts within a family (Optimizer::family())
  std::vector<StateSlot> slots;
  // Whether "<param>.step" is written (it is read back whenever present).
  bool saves_step = true;
  // Whether saved state holds a parameter; empty: it has "<param>.step".
  std::function<bool(const TensorMap& state, const std::string& param_name)> was_stepped;
};

// One parameter's state: the update count and the slots, in table order.
struct ParamSlots {
  int64_t step = 0;
  std::vector<at::Tensor> slots;
  at::Tensor& operator[](size_t slot) { return slots.at(slot); }
  const at::Tensor& operator[](size_t slot) const { return slots.at(slot); }
  bool started() const;  // any slot defined: stepped, or loaded
};

class SlotOptimizer : public Optimizer {
 public:
  SlotOptimizer(const std::vector<ParamGroupSpec>& groups, std::unique_ptr<torch::optim::OptimizerOptions> defaults,
                double default_weight_decay, StateLayout layout);

  std::string name() const override { return layout_.name; }
  std::string family() const override { return layout_.family; }
  TensorMap state_by_name() const override;
  // Another family's state resets every slot (Reset) or throws (Convert);
  // a parameter the saved state does not hold starts afresh.
  void load_state_by_name(const TensorMap& state, StateConversion conversion) override;

 protected:
  // Calls visit(parameter, its state) for each parameter with a gradient, in
  // group order, after check_parameter, with missing slots created and the
  // step count already incremented.
  void for_each_param_with_grad(const std::function<void(const ParamRef&, ParamSlots&)>& visit);
  // What this optimizer accepts of a parameter it is about to update; throws
  // std::invalid_argument. Default: check_fused_cpu_parameter.
  virtual void check_parameter(size_t group, size_t index) const { check_fused_cpu_parameter(group, index); }
  // For an optimizer that also has CUDA kernels: a CUDA parameter passes
  // when the build has them (`cuda_kernels`), else throws naming it; a CPU
  // one is checked by check_fused_cpu_parameter.
  void check_fused_cpu_or_cuda_parameter(size_t group, size_t index, bool cuda_kernels) const;

  ParamSlots& slots_of(size_t group, size_t index) { return state_.at(group).at(index); }
  const StateLayout& layout() const { return layout_; }

 private:
  void create_missing_slots(const at::Tensor& param, ParamSlots& s) const;

  StateLayout layout_;
  std::vector<std::vector<ParamSlots>> state_;  // [group][param]
};

}  // namespace ftcore::sdk

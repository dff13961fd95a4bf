// The head of every optimizer step(), as torch's optimizers write it: the
// loss closure runs with grad enabled, and the update after it without
// autograd (in-place writes to leaf parameters would otherwise be refused).
//
//   at::Tensor step(LossClosure closure) override {
//     sdk::StepGuard guard(closure);
//     ...update...
//     return guard.loss();
//   }
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>

namespace ftcore::sdk {

// The head of every step(): runs the closure (if any) with grad enabled and
// keeps grad disabled until it goes out of scope, as torch's optimizers do.
class StepGuard {
 public:
  explicit StepGuard(const torch::optim::Optimizer::LossClosure& closure) {
    if (closure) {
      c10::AutoGradMode enable_grad(true);
      loss_ = closure();
    }
  }
  const at::Tensor& loss() const { return loss_; }

 private:
  c10::NoGradGuard no_grad_;
  at::Tensor loss_;
};

}  // namespace ftcore::sdk

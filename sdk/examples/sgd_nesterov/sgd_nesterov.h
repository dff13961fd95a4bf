// optimizer/sgd_nesterov: stochastic gradient descent with momentum and
// Nesterov's look-ahead, exactly as torch.optim.SGD(nesterov=True) defines it.
// An out-of-tree example: it includes only ftcore SDK headers and libtorch,
// and is built against an INSTALLED ftcore (see README.md).
//
// The update of one parameter p with gradient g (mu = momentum, tau =
// dampening, lambda = weight_decay, lr = base lr x the group's lr_scale x the
// scheduler's factor; b: the momentum buffer, d: the step direction):
//
//   g   <- g + lambda * p                    L2 weight decay (coupled, as SGD does it)
//   b   <- g                                 first step: the buffer starts at g, undamped
//   b   <- mu * b + (1 - tau) * g            every later step
//   d   <- g + mu * b                        nesterov = true: look ahead along the buffer
//   d   <- b                                 nesterov = false: classical (heavy-ball) momentum
//   p   <- p - lr * d
//
// With momentum = 0 there is no buffer and the step is plain SGD. Nesterov
// needs momentum > 0 and dampening = 0 (the same rule torch.optim.SGD enforces).
//
// Sutskever, Martens, Dahl & Hinton, "On the importance of initialization and
// momentum in deep learning", ICML 2013, https://proceedings.mlr.press/v28/sutskever13.html
// The form above is torch's (torch/optim/sgd.py): it applies the look-ahead
// to the gradient instead of evaluating it at p + mu * v, which gives the same
// iterates in terms of the shifted parameters (Bengio et al. 2012,
// "Advances in optimizing recurrent networks", https://arxiv.org/abs/1212.0901).
//
// State per parameter: one slot, the momentum buffer, in the parameter's
// dtype and device; saved by parameter name as "<name>.momentum_buffer" in the
// "sgd" state family. sdk::SlotOptimizer saves, loads and loops; we write the update.
#pragma once

#include <vector>

#include <ftcore/sdk/options_with_lr.h>
#include <ftcore/sdk/params.h>
#include <ftcore/sdk/slot_optimizer.h>

namespace sgd_nesterov {

// Chainable setters, as libtorch's own optimizer options have.
struct SgdNesterovOptions : public ftcore::sdk::OptionsWithLr<SgdNesterovOptions> {
  SgdNesterovOptions() : OptionsWithLr(1e-2) {}
  double momentum = 0.9;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = true;

  SgdNesterovOptions& set_momentum(double v) { momentum = v; return *this; }
  SgdNesterovOptions& set_dampening(double v) { dampening = v; return *this; }
  SgdNesterovOptions& set_weight_decay(double v) { weight_decay = v; return *this; }
  SgdNesterovOptions& set_nesterov(bool v) { nesterov = v; return *this; }
};

// The recipe keys, their defaults, ranges and docs (`ftcore plugins describe sgd_nesterov`).
ftcore::sdk::ParamSpec sgd_nesterov_param_spec();
// Typed options from validated recipe values; throws ftcore::sdk::OptionError
// when the combination is impossible (nesterov without momentum, or with dampening).
SgdNesterovOptions sgd_nesterov_options_from(const ftcore::sdk::Options& options);

class SgdNesterov : public ftcore::sdk::SlotOptimizer {
 public:
  SgdNesterov(const std::vector<ftcore::sdk::ParamGroupSpec>& groups, const SgdNesterovOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;

 protected:
  void check_parameter(size_t group, size_t index) const override;  // any dense tensor, any device

 private:
  SgdNesterovOptions options_;
};

}  // namespace sgd_nesterov

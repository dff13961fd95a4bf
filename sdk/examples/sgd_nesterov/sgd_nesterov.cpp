// optimizer/sgd_nesterov: options, the step, state by name. The step is written
// with the same ATen operations, in the same order, as torch.optim.SGD's
// single-tensor path, so the two agree to the last bit on the same libtorch.
#include "sgd_nesterov.h"

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace sgd_nesterov {

namespace sdk = ftcore::sdk;

sdk::ParamSpec sgd_nesterov_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-2).above(0.0).with_doc("Base learning rate (scaled per group by lr_scale and the scheduler).");
  s.add_float("momentum", 0.9).at_least(0.0).with_doc("Momentum factor mu; 0 disables the buffer (plain SGD).");
  s.add_float("dampening", 0.0).with_range(0.0, 1.0).with_doc(
      "Dampening tau of the gradient added to the buffer; must be 0 with nesterov.");
  s.add_float("weight_decay", 0.0).at_least(0.0).with_doc("L2 penalty added to the gradient (groups may override).");
  s.add_bool("nesterov", true).with_doc("Nesterov momentum; false gives classical (heavy-ball) momentum.");
  return s;
}

SgdNesterovOptions sgd_nesterov_options_from(const sdk::Options& options) {
  SgdNesterovOptions o;
  o.lr = options.get_float("lr");
  o.set_momentum(options.get_float("momentum"))
      .set_dampening(options.get_float("dampening"))
      .set_weight_decay(options.get_float("weight_decay"))
      .set_nesterov(options.get_bool("nesterov"));
  if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0)) {
    throw std::invalid_argument("nesterov = true needs momentum > 0 and dampening = 0, got momentum = " +
                                sdk::format_param_value(o.momentum) + ", dampening = " +
                                sdk::format_param_value(o.dampening) +
                                "; set nesterov = false for damped classical momentum");
  }
  return o;
}

SgdNesterov::SgdNesterov(const std::vector<sdk::ParamGroupSpec>& groups, const SgdNesterovOptions& options)
    : sdk::Optimizer(groups, std::make_unique<SgdNesterovOptions>(options), options.weight_decay), options_(options) {
  for (const auto& g : param_groups_) momentum_buffers_.emplace_back(g.params().size());
}

at::Tensor SgdNesterov::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const double mu = options_.momentum, tau = options_.dampening;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const double lr = param_groups_[g].options().get_lr();  // base lr x lr_scale (x scheduler)
    const double weight_decay = group_info(g).weight_decay;
    auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;  // no gradient this step: the buffer does not move either
      TORCH_CHECK(!p.grad().is_sparse(), "sgd_nesterov: sparse gradients are not supported (",
                  group_info(g).param_names[i], ")");
      at::Tensor d = p.grad();
      if (weight_decay != 0.0) d = d.add(p, weight_decay);  // g + lambda * p (a new tensor: p.grad is kept)
      if (mu != 0.0) {
        at::Tensor& buf = momentum_buffers_[g][i];
        if (!buf.defined()) {
          buf = d.detach().clone();  // first step: b = g, no dampening
        } else {
          buf.mul_(mu).add_(d, 1.0 - tau);  // b = mu * b + (1 - tau) * g
        }
        d = options_.nesterov ? d.add(buf, mu) : buf;  // g + mu * b, or b
      }
      p.add_(d, -lr);  // p = p - lr * d
    }
  }
  return loss;
}

sdk::TensorMap SgdNesterov::state_by_name() const {
  sdk::TensorMap out = new_state();  // the schema, name and family metadata every state file carries
  for (size_t g = 0; g < momentum_buffers_.size(); ++g) {
    for (size_t i = 0; i < momentum_buffers_[g].size(); ++i) {
      const at::Tensor& buf = momentum_buffers_[g][i];
      if (!buf.defined()) continue;  // never stepped, or momentum = 0
      out.add(group_info(g).param_names[i] + ".momentum_buffer", buf);
    }
  }
  return out;
}

void SgdNesterov::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  for (auto& group : momentum_buffers_)
    for (auto& buf : group) buf = at::Tensor();
  // Another family's state has nothing to convert from: with Reset, start
  // afresh; with Convert, accept_state throws naming who wrote it.
  if (!accept_state(state, conversion)) return;
  if (options_.momentum == 0.0) return;  // plain SGD keeps no state
  for (size_t g = 0; g < momentum_buffers_.size(); ++g) {
    const auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& name = group_info(g).param_names[i];
      if (!state.find(name + ".momentum_buffer")) continue;  // not stepped before the save
      const at::Tensor& saved = sdk::require_state_tensor(state, name, "momentum_buffer", params[i].sizes());
      momentum_buffers_[g][i] = saved.to(params[i].device(), params[i].scalar_type()).clone();
    }
  }
}

}  // namespace sgd_nesterov

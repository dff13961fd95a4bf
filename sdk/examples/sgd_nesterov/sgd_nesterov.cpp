// optimizer/sgd_nesterov: options, its state slot, the step. The step is written
// with the same ATen operations, in the same order, as torch.optim.SGD's
// single-tensor path, so the two agree to the last bit on the same libtorch.
#include "sgd_nesterov.h"

#include <string>

#include <ATen/ATen.h>

namespace sgd_nesterov {

namespace sdk = ftcore::sdk;

sdk::ParamSpec sgd_nesterov_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-2).above(0.0).with_doc("Base learning rate (scaled per group by lr_scale and the scheduler).");
  s.add_float("momentum", 0.9).at_least(0.0).with_doc("Momentum factor mu; 0 disables the buffer (plain SGD).");
  s.add_float("dampening", 0.0)
      .with_range(0.0, 1.0)
      .with_doc("Dampening tau of the gradient added to the buffer; must be 0 with nesterov.");
  s.add_float("weight_decay", 0.0).at_least(0.0).with_doc("L2 penalty added to the gradient (groups may override).");
  s.add_bool("nesterov", true).with_doc("Nesterov momentum; false gives classical (heavy-ball) momentum.");
  // Checked by `ftcore validate` with the recipe's line, and again by the factory.
  s.rule({"nesterov", "momentum", "dampening"}, "nesterov = true needs momentum > 0 and dampening = 0",
         [](const sdk::Options& o) -> std::string {
           const double momentum = o.get_float("momentum"), dampening = o.get_float("dampening");
           if (!o.get_bool("nesterov") || (momentum > 0.0 && dampening == 0.0)) return "";
           return "nesterov = true needs momentum > 0 and dampening = 0, got momentum = " +
                  sdk::format_param_value(momentum) + ", dampening = " + sdk::format_param_value(dampening) +
                  "; set nesterov = false for damped classical momentum";
         });
  return s;
}

SgdNesterovOptions sgd_nesterov_options_from(const sdk::Options& options) {
  sdk::require_rules(options);
  SgdNesterovOptions o;
  o.lr = options.get_float("lr");
  o.set_momentum(options.get_float("momentum"))
      .set_dampening(options.get_float("dampening"))
      .set_weight_decay(options.get_float("weight_decay"))
      .set_nesterov(options.get_bool("nesterov"));
  return o;
}

namespace {

// The momentum buffer: created by the step itself (it starts as the first
// gradient, not as zeros), read back in the parameter's dtype and device.
// Plain SGD (momentum = 0) keeps none and ignores a saved one.
sdk::StateLayout sgd_layout(bool has_momentum) {
  sdk::StateSlot buffer{"momentum_buffer"};
  buffer.load = [has_momentum](const sdk::TensorMap& state, const std::string& name, const at::Tensor& p) {
    if (!has_momentum) return at::Tensor();
    return sdk::require_state_tensor(state, name, "momentum_buffer", p.sizes()).to(p.device(), p.scalar_type()).clone();
  };
  sdk::StateLayout layout{"sgd_nesterov", "sgd", {buffer}, /*saves_step=*/false};
  layout.was_stepped = [](const sdk::TensorMap& state, const std::string& name) {
    return state.find(name + ".momentum_buffer") != nullptr;  // not stepped before the save otherwise
  };
  return layout;
}

}  // namespace

SgdNesterov::SgdNesterov(const std::vector<sdk::ParamGroupSpec>& groups, const SgdNesterovOptions& options)
    : sdk::SlotOptimizer(groups, std::make_unique<SgdNesterovOptions>(options), options.weight_decay,
                         sgd_layout(options.momentum != 0.0)),
      options_(options) {}

void SgdNesterov::check_parameter(size_t group, size_t index) const {
  TORCH_CHECK(!param_groups_[group].params()[index].grad().is_sparse(),
              "sgd_nesterov: sparse gradients are not supported (", group_info(group).param_names[index], ")");
}

at::Tensor SgdNesterov::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  const double mu = options_.momentum, tau = options_.dampening;
  // Parameters without a gradient this step are skipped: their buffers do not move either.
  for_each_param_with_grad([&](const sdk::ParamRef& p, sdk::ParamSlots& state) {
    at::Tensor d = p.param.grad();
    if (p.weight_decay != 0.0) d = d.add(p.param, p.weight_decay);  // g + lambda * p (a new tensor: p.grad is kept)
    if (mu != 0.0) {
      at::Tensor& buf = state[0];
      if (!buf.defined()) {
        buf = d.detach().clone();  // first step: b = g, no dampening
      } else {
        buf.mul_(mu).add_(d, 1.0 - tau);  // b = mu * b + (1 - tau) * g
      }
      d = options_.nesterov ? d.add(buf, mu) : buf;  // g + mu * b, or b
    }
    p.param.add_(d, -p.lr);  // p = p - lr * d; lr = base lr x lr_scale (x scheduler)
  });
  return guard.loss();
}

}  // namespace sgd_nesterov

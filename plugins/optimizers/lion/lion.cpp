// optimizer/lion: options, lazy state, the step, state by name.
#include "lion.h"

#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "lion_kernel.h"
#include "state_codec.h"  // blockwise8: reads lion_8bit's 8-bit momentum too

namespace ftcore::plugins::lion {


sdk::ParamSpec lion_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-4).above(0.0).with_doc(
      "Base learning rate (scaled per group by lr_scale and the scheduler); Lion wants 3-10x less than AdamW.");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.99})
      .with_range(0.0, 1.0)
      .with_doc("beta1 interpolates the update direction, beta2 decays the momentum.");
  s.add_float("weight_decay", 0.0).at_least(0.0).with_doc(
      "Decoupled weight decay, p *= 1 - lr * weight_decay (groups may override).");
  s.add_bool("decoupled_weight_decay", false)
      .with_doc("Divide weight_decay by the initial lr, so the decay does not follow the schedule (lion-pytorch).");
  return s;
}

LionOptions lion_options_from(const sdk::Options& options) {
  LionOptions o;
  o.lr = options.get_float("lr");
  o.betas = options.get_pair("betas");
  o.weight_decay = options.get_float("weight_decay");
  o.decoupled_weight_decay = options.get_bool("decoupled_weight_decay");
  return o;
}

Lion::Lion(const std::vector<sdk::ParamGroupSpec>& groups, const LionOptions& options)
    : sdk::Optimizer(groups, std::make_unique<LionOptions>(options), options.weight_decay), options_(options) {
  for (const auto& g : param_groups_) exp_avg_.emplace_back(g.params().size());
}

at::Tensor& Lion::exp_avg_for(size_t group, size_t index) {
  at::Tensor& m = exp_avg_[group][index];
  if (!m.defined()) {
    const at::Tensor& p = param_groups_[group].params()[index];
    m = at::zeros(p.sizes(), p.options().dtype(at::kFloat));
  }
  return m;
}

at::Tensor Lion::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const auto [beta1, beta2] = options_.betas;
  std::vector<LionTensor> work;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const double lr = param_groups_[g].options().get_lr();
    double wd = group_info(g).weight_decay;
    // lion-pytorch divides by the lr the optimizer was built with, not the scheduled one.
    if (options_.decoupled_weight_decay) wd /= options_.lr;
    auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;
      const std::string& n = group_info(g).param_names[i];
      check_fused_cpu_parameter(g, i);
      // Scalars in double, then rounded to fp32, as ATen rounds Python scalars.
      LionScalars sc;
      sc.decay = static_cast<float>(1.0 - lr * wd);
      sc.beta1 = static_cast<float>(beta1);
      sc.one_minus_beta1 = static_cast<float>(1.0 - beta1);
      sc.beta2 = static_cast<float>(beta2);
      sc.one_minus_beta2 = static_cast<float>(1.0 - beta2);
      sc.neg_lr = static_cast<float>(-lr);
      work.push_back({p.data_ptr(), p.grad().data_ptr(), exp_avg_for(g, i).data_ptr<float>(), p.numel(),
                      p.scalar_type(), sc});
    }
  }
  fused_lion_step(work);
  return loss;
}

sdk::TensorMap Lion::state_by_name() const {
  sdk::TensorMap out = new_state();
  for (size_t g = 0; g < exp_avg_.size(); ++g)
    for (size_t i = 0; i < exp_avg_[g].size(); ++i)
      if (exp_avg_[g][i].defined())  // undefined: never stepped
        out.add(group_info(g).param_names[i] + ".exp_avg", exp_avg_[g][i]);
  return out;
}

void Lion::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  if (!accept_state(state, conversion)) {  // another family's state, and the recipe says reset
    for (auto& group : exp_avg_)
      for (auto& m : group) m = at::Tensor();
    return;
  }
  for (size_t g = 0; g < exp_avg_.size(); ++g) {
    const auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& n = group_info(g).param_names[i];
      if (!blockwise8::has_moment(state, n, "exp_avg")) {  // a parameter that had not been stepped
        exp_avg_[g][i] = at::Tensor();
        continue;
      }
      // fp32 as saved, or lion_8bit's 8-bit momentum dequantized (bitsandbytes' dequantize_blockwise).
      exp_avg_[g][i] = blockwise8::read_moment_fp32(state, n, "exp_avg", params[i].sizes()).to(params[i].device());
    }
  }
}

}  // namespace ftcore::plugins::lion

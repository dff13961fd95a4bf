// optimizer/adamw: options, lazy state, the step, state by name.
#include "adamw.h"

#include <cmath>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "adamw_kernel.h"
#include "state_codec.h"  // blockwise8: reads adamw_8bit's 8-bit moments too

namespace ftcore::plugins::adamw {

sdk::ParamSpec adamw_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-3).above(0.0).with_doc("Base learning rate (scaled per group by lr_scale and the scheduler).");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.999})
      .with_range(0.0, 1.0, false, true)
      .with_doc("Decay rates of the first and second moment estimates.");
  s.add_float("eps", 1e-8).above(0.0).with_doc("Added to the denominator for numerical stability.");
  s.add_float("weight_decay", 0.01).at_least(0.0).with_doc("Decoupled weight decay (groups may override).");
  s.add_bool("amsgrad", false).with_doc("Use the running maximum of the second moment (AMSGrad).");
  return s;
}

AdamWOptions adamw_options_from(const sdk::Options& options) {
  AdamWOptions o;
  o.lr = options.get_float("lr");
  o.betas = options.get_pair("betas");
  o.eps = options.get_float("eps");
  o.weight_decay = options.get_float("weight_decay");
  o.amsgrad = options.get_bool("amsgrad");
  return o;
}

AdamW::AdamW(const std::vector<sdk::ParamGroupSpec>& groups, const AdamWOptions& options)
    : sdk::Optimizer(groups, std::make_unique<AdamWOptions>(options), options.weight_decay), options_(options) {
  for (const auto& g : param_groups_) state_.emplace_back(g.params().size());
}

AdamW::ParamState& AdamW::state_for(size_t group, size_t index) {
  ParamState& s = state_[group][index];
  if (!s.exp_avg.defined()) {
    const at::Tensor& p = param_groups_[group].params()[index];
    auto opts = p.options().dtype(at::kFloat);
    s.exp_avg = at::zeros(p.sizes(), opts);
    s.exp_avg_sq = at::zeros(p.sizes(), opts);
    if (options_.amsgrad) s.max_exp_avg_sq = at::zeros(p.sizes(), opts);
  }
  return s;
}

at::Tensor AdamW::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  const auto [beta1, beta2] = options_.betas;
  std::vector<AdamWTensor> work;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    const double lr = param_groups_[g].options().get_lr();
    const double wd = group_info(g).weight_decay;
    auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;
      check_fused_cpu_parameter(g, i);
      ParamState& s = state_for(g, i);
      s.step += 1;
      // Scalars in double, then rounded to fp32, as torch's Python-side math does.
      const double t = static_cast<double>(s.step);
      const double bias_correction1 = 1.0 - std::pow(beta1, t);
      const double bias_correction2 = 1.0 - std::pow(beta2, t);
      AdamWScalars sc;
      sc.decay = static_cast<float>(1.0 - lr * wd);
      sc.one_minus_beta1 = static_cast<float>(1.0 - beta1);
      sc.lerp_from_end = std::abs(1.0 - beta1) >= 0.5;
      sc.beta2 = static_cast<float>(beta2);
      sc.one_minus_beta2 = static_cast<float>(1.0 - beta2);
      sc.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
      sc.eps = static_cast<float>(options_.eps);
      sc.neg_step_size = static_cast<float>(-(lr / bias_correction1));
      work.push_back({p.data_ptr(), p.grad().data_ptr(), s.exp_avg.data_ptr<float>(), s.exp_avg_sq.data_ptr<float>(),
                      options_.amsgrad ? s.max_exp_avg_sq.data_ptr<float>() : nullptr, p.numel(), p.scalar_type(), sc});
    }
  }
  fused_adamw_step(work);
  return loss;
}

sdk::TensorMap AdamW::state_by_name() const {
  sdk::TensorMap out = new_state();
  out.metadata["amsgrad"] = options_.amsgrad ? "true" : "false";
  for (size_t g = 0; g < state_.size(); ++g) {
    for (size_t i = 0; i < state_[g].size(); ++i) {
      const ParamState& s = state_[g][i];
      if (!s.exp_avg.defined()) continue;  // never stepped
      const std::string& n = group_info(g).param_names[i];
      out.add(n + ".step", at::scalar_tensor(s.step, at::kLong));
      out.add(n + ".exp_avg", s.exp_avg);
      out.add(n + ".exp_avg_sq", s.exp_avg_sq);
      if (s.max_exp_avg_sq.defined()) out.add(n + ".max_exp_avg_sq", s.max_exp_avg_sq);
    }
  }
  return out;
}

void AdamW::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  if (!accept_state(state, conversion)) {  // another family's state, and the recipe says reset
    for (auto& group : state_)
      for (auto& s : group) s = ParamState{};
    return;
  }
  for (size_t g = 0; g < state_.size(); ++g) {
    const auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& n = group_info(g).param_names[i];
      ParamState s;
      if (!state.find(n + ".step")) {  // a parameter that had not been stepped
        state_[g][i] = s;
        continue;
      }
      s.step = state.find(n + ".step")->item<int64_t>();
      auto load = [&](const char* slot) {
        return sdk::require_state_tensor(state, n, slot, params[i].sizes()).to(params[i].device(), at::kFloat).clone();
      };
      // fp32 moments as saved, or adamw_8bit's 8-bit ones dequantized (bitsandbytes' dequantize_blockwise).
      auto moment = [&](const char* slot) {
        return blockwise8::read_moment_fp32(state, n, slot, params[i].sizes()).to(params[i].device());
      };
      s.exp_avg = moment("exp_avg");
      s.exp_avg_sq = moment("exp_avg_sq");
      if (options_.amsgrad) {
        // Resuming AMSGrad from plain Adam state starts the maximum at the current moment.
        s.max_exp_avg_sq = state.find(n + ".max_exp_avg_sq") ? load("max_exp_avg_sq") : s.exp_avg_sq.clone();
      }
      state_[g][i] = std::move(s);
    }
  }
}

}  // namespace ftcore::plugins::adamw

// optimizer/adafactor: options and their rules, lazy state, the step's
// per-tensor settings, state by name.
#include "adafactor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "adafactor_kernel.h"

namespace ftcore::plugins::adafactor {


sdk::ParamSpec adafactor_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", std::nullopt).above(0.0).with_doc(
      "Fixed learning rate; only with relative_step = false (then required).");
  s.add_pair("eps", sdk::FloatPair{1e-30, 1e-3})
      .at_least(0.0)
      .with_doc("eps1 added to the squared gradient, and eps2, the smallest parameter scale (scale_parameter).");
  s.add_float("clip_threshold", 1.0).above(0.0).with_doc("Largest RMS of the unscaled update.");
  s.add_float("decay_rate", -0.8)
      .with_range(-std::numeric_limits<double>::infinity(), 0.0)
      .with_doc("The second-moment decay is 1 - step^decay_rate.");
  s.add_float("beta1", std::nullopt).with_range(0.0, 1.0, false, true).with_doc(
      "Momentum of the update (keeps exp_avg: 4 more bytes per parameter); unset: none.");
  s.add_float("weight_decay", 0.0).at_least(0.0).with_doc(
      "Weight decay, p -= weight_decay * lr * p (groups may override).");
  s.add_bool("scale_parameter", true).with_doc("Scale the step by max(eps2, RMS(parameter)).");
  s.add_bool("relative_step", true)
      .with_doc("Step size min(1e-2, 1/sqrt(step)) instead of lr (lr_scale and the schedule multiply it).");
  s.add_bool("warmup_init", false).with_doc("Relative step min(1e-6 * step, 1/sqrt(step)); needs relative_step.");
  return s;
}

AdafactorOptions adafactor_options_from(const sdk::Options& options) {
  AdafactorOptions o;
  o.eps = options.get_pair("eps");
  o.clip_threshold = options.get_float("clip_threshold");
  o.decay_rate = options.get_float("decay_rate");
  if (options.has_value("beta1")) o.beta1 = options.get_float("beta1");
  o.weight_decay = options.get_float("weight_decay");
  o.scale_parameter = options.get_bool("scale_parameter");
  o.relative_step = options.get_bool("relative_step");
  o.warmup_init = options.get_bool("warmup_init");
  const bool has_lr = options.has_value("lr");
  std::ostringstream message;
  if (has_lr && o.relative_step) {
    message << "lr = " << options.get_float("lr") << " cannot be combined with relative_step = true, which sets "
            << "the step size itself; set relative_step = false to train with a fixed lr";
    throw std::invalid_argument(message.str());
  }
  if (o.warmup_init && !o.relative_step) {
    message << "warmup_init = true needs relative_step = true (it warms up the relative step size)";
    throw std::invalid_argument(message.str());
  }
  if (!has_lr && !o.relative_step) {
    message << "relative_step = false needs an lr";
    throw std::invalid_argument(message.str());
  }
  o.lr = has_lr ? options.get_float("lr") : 1.0;
  return o;
}

std::vector<int64_t> row_stat_shape(at::IntArrayRef shape) { return {shape.begin(), shape.end() - 1}; }

std::vector<int64_t> col_stat_shape(at::IntArrayRef shape) {
  std::vector<int64_t> out(shape.begin(), shape.end() - 2);
  out.push_back(shape.back());
  return out;
}

Adafactor::Adafactor(const std::vector<sdk::ParamGroupSpec>& groups, const AdafactorOptions& options)
    : sdk::Optimizer(groups, std::make_unique<AdafactorOptions>(options), options.weight_decay), options_(options) {
  for (const auto& g : param_groups_) state_.emplace_back(g.params().size());
}

Adafactor::ParamState& Adafactor::state_for(size_t group, size_t index) {
  ParamState& s = state_[group][index];
  const at::Tensor& p = param_groups_[group].params()[index];
  auto opts = p.options().dtype(at::kFloat);
  if (!s.initialized()) {
    if (p.dim() >= 2) {
      s.exp_avg_sq_row = at::zeros(row_stat_shape(p.sizes()), opts);
      s.exp_avg_sq_col = at::zeros(col_stat_shape(p.sizes()), opts);
    } else {
      s.exp_avg_sq = at::zeros(p.sizes(), opts);
    }
  }
  if (options_.beta1 && !s.exp_avg.defined()) s.exp_avg = at::zeros(p.sizes(), opts);
  return s;
}

double Adafactor::relative_step_size(size_t group, int64_t step) const {
  const double group_lr = param_groups_[group].options().get_lr();
  if (!options_.relative_step) return group_lr;
  const double t = static_cast<double>(step);
  const double min_step = options_.warmup_init ? 1e-6 * t : 1e-2;
  return std::min(min_step, 1.0 / std::sqrt(t)) * group_lr;  // group_lr: 1.0 x lr_scale x schedule
}

at::Tensor Adafactor::step(LossClosure closure) {
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable_grad(true);
    loss = closure();
  }
  std::vector<AdafactorTensor> work;
  for (size_t g = 0; g < param_groups_.size(); ++g) {
    auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      if (!p.grad().defined()) continue;
      const std::string& n = group_info(g).param_names[i];
      check_fused_cpu_parameter(g, i);
      ParamState& s = state_for(g, i);
      s.step += 1;
      // Python-side scalars in double, rounded to fp32 where they meet a tensor.
      const double beta2t = 1.0 - std::pow(static_cast<double>(s.step), options_.decay_rate);
      AdafactorStepConfig c;
      c.eps1 = static_cast<float>(options_.eps.first);
      c.beta2t = static_cast<float>(beta2t);
      c.one_minus_beta2t = static_cast<float>(1.0 - beta2t);
      c.relative_step_size = relative_step_size(g, s.step);
      c.scale_parameter = options_.scale_parameter;
      c.eps2 = options_.eps.second;
      c.clip_threshold = options_.clip_threshold;
      c.use_beta1 = options_.beta1.has_value();
      c.beta1 = static_cast<float>(options_.beta1.value_or(0.0));
      c.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1.value_or(0.0));
      c.weight_decay = group_info(g).weight_decay;

      AdafactorTensor t{};
      t.param = p.data_ptr();
      t.grad = p.grad().data_ptr();
      t.dtype = p.scalar_type();
      t.numel = p.numel();
      t.factored = p.dim() >= 2;
      if (t.factored) {
        t.rows = p.size(-2);
        t.cols = p.size(-1);
        t.matrices = t.rows * t.cols == 0 ? 0 : t.numel / (t.rows * t.cols);
        t.exp_avg_sq_row = s.exp_avg_sq_row.data_ptr<float>();
        t.exp_avg_sq_col = s.exp_avg_sq_col.data_ptr<float>();
      } else {
        t.exp_avg_sq = s.exp_avg_sq.data_ptr<float>();
      }
      t.exp_avg = c.use_beta1 ? s.exp_avg.data_ptr<float>() : nullptr;
      t.config = c;
      work.push_back(t);
    }
  }
  fused_adafactor_step(work);
  return loss;
}

sdk::TensorMap Adafactor::state_by_name() const {
  sdk::TensorMap out = new_state();
  for (size_t g = 0; g < state_.size(); ++g) {
    for (size_t i = 0; i < state_[g].size(); ++i) {
      const ParamState& s = state_[g][i];
      if (!s.initialized()) continue;  // never stepped
      const std::string& n = group_info(g).param_names[i];
      out.add(n + ".step", at::scalar_tensor(s.step, at::kLong));
      if (s.exp_avg_sq_row.defined()) {
        out.add(n + ".exp_avg_sq_row", s.exp_avg_sq_row);
        out.add(n + ".exp_avg_sq_col", s.exp_avg_sq_col);
      } else {
        out.add(n + ".exp_avg_sq", s.exp_avg_sq);
      }
      if (s.exp_avg.defined()) out.add(n + ".exp_avg", s.exp_avg);
    }
  }
  return out;
}

void Adafactor::load_state_by_name(const sdk::TensorMap& state, sdk::StateConversion conversion) {
  if (!accept_state(state, conversion)) {  // another family's state, and the recipe says reset
    for (auto& group : state_)
      for (auto& s : group) s = ParamState{};
    return;
  }
  for (size_t g = 0; g < state_.size(); ++g) {
    const auto& params = param_groups_[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const std::string& n = group_info(g).param_names[i];
      const at::Tensor& p = params[i];
      ParamState s;
      if (!state.find(n + ".step")) {  // a parameter that had not been stepped
        state_[g][i] = s;
        continue;
      }
      s.step = state.find(n + ".step")->item<int64_t>();
      auto load = [&](const char* slot, at::IntArrayRef shape) {
        return sdk::require_state_tensor(state, n, slot, shape).to(p.device(), at::kFloat).clone();
      };
      if (p.dim() >= 2) {
        s.exp_avg_sq_row = load("exp_avg_sq_row", row_stat_shape(p.sizes()));
        s.exp_avg_sq_col = load("exp_avg_sq_col", col_stat_shape(p.sizes()));
      } else {
        s.exp_avg_sq = load("exp_avg_sq", p.sizes());
      }
      // Turning beta1 on mid-run starts the first moment at zero (state_for creates it).
      if (options_.beta1 && state.find(n + ".exp_avg")) s.exp_avg = load("exp_avg", p.sizes());
      state_[g][i] = std::move(s);
    }
  }
}

}  // namespace ftcore::plugins::adafactor

// optimizer/adafactor: options and their rules, its state slots, the step's
// per-tensor settings.
#include "adafactor.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "ftcore/sdk/option_fields.h"

#include "adafactor_kernel.h"

namespace ftcore::plugins::adafactor {

sdk::ParamSpec adafactor_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", std::nullopt)
      .above(0.0)
      .with_doc("Fixed learning rate; only with relative_step = false (then required).");
  s.add_pair("eps", sdk::FloatPair{1e-30, 1e-3})
      .at_least(0.0)
      .with_doc("eps1 added to the squared gradient, and eps2, the smallest parameter scale (scale_parameter).");
  s.add_float("clip_threshold", 1.0).above(0.0).with_doc("Largest RMS of the unscaled update.");
  s.add_float("decay_rate", -0.8)
      .with_range(-std::numeric_limits<double>::infinity(), 0.0)
      .with_doc("The second-moment decay is 1 - step^decay_rate.");
  s.add_float("beta1", std::nullopt)
      .with_range(0.0, 1.0, false, true)
      .with_doc("Momentum of the update (keeps exp_avg: 4 more bytes per parameter); unset: none.");
  s.add_float("weight_decay", 0.0)
      .at_least(0.0)
      .with_doc("Weight decay, p -= weight_decay * lr * p (groups may override).");
  s.add_bool("scale_parameter", true).with_doc("Scale the step by max(eps2, RMS(parameter)).");
  s.add_bool("relative_step", true)
      .with_doc("Step size min(1e-2, 1/sqrt(step)) instead of lr (lr_scale and the schedule multiply it).");
  s.add_bool("warmup_init", false).with_doc("Relative step min(1e-6 * step, 1/sqrt(step)); needs relative_step.");
  // Checked by `ftcore validate` at the recipe's line, and again by the factory.
  s.rule({"lr", "relative_step"}, "lr only with relative_step = false, which then needs it",
         [](const sdk::Options& o) -> std::string {
           const bool has_lr = o.has_value("lr"), relative = o.get_bool("relative_step");
           if (has_lr && relative)
             return "lr = " + sdk::format_param_value(o.get_float("lr")) +
                    " cannot be combined with relative_step = true, which sets the step size itself; set "
                    "relative_step = false to train with a fixed lr";
           if (!has_lr && !relative) return "relative_step = false needs an lr";
           return "";
         });
  s.rule({"warmup_init", "relative_step"}, "warmup_init = true needs relative_step = true",
         [](const sdk::Options& o) -> std::string {
           if (o.get_bool("warmup_init") && !o.get_bool("relative_step"))
             return "warmup_init = true needs relative_step = true (it warms up the relative step size)";
           return "";
         });
  return s;
}

AdafactorOptions adafactor_options_from(const sdk::Options& options) {
  using O = AdafactorOptions;
  O o = sdk::read_fields<O>(options, {{"eps", &O::eps}, {"clip_threshold", &O::clip_threshold},
                                      {"decay_rate", &O::decay_rate}, {"beta1", &O::beta1},
                                      {"weight_decay", &O::weight_decay}, {"scale_parameter", &O::scale_parameter},
                                      {"relative_step", &O::relative_step}, {"warmup_init", &O::warmup_init}});
  sdk::require_rules(options);
  const bool has_lr = options.has_value("lr");
  o.lr = has_lr ? options.get_float("lr") : 1.0;
  return o;
}

std::vector<int64_t> row_stat_shape(at::IntArrayRef shape) { return {shape.begin(), shape.end() - 1}; }

std::vector<int64_t> col_stat_shape(at::IntArrayRef shape) {
  std::vector<int64_t> out(shape.begin(), shape.end() - 2);
  out.push_back(shape.back());
  return out;
}

namespace {

enum Slot : size_t { kRow, kCol, kExpAvgSq, kExpAvg };

// A factored (>= 2 dims) or unfactored statistic, or the momentum: fp32 zeros
// of `shape(param)` for the parameters that keep it, read back as saved.
sdk::StateSlot statistic(std::string name, std::function<bool(const at::Tensor&)> kept,
                         std::function<std::vector<int64_t>(const at::Tensor&)> shape) {
  sdk::StateSlot s;
  s.name = name;
  s.make = [kept, shape](const at::Tensor& p) {
    return kept(p) ? at::zeros(shape(p), p.options().dtype(at::kFloat)) : at::Tensor();
  };
  s.load = [name, kept, shape](const sdk::TensorMap& state, const std::string& n, const at::Tensor& p) {
    if (!kept(p)) return at::Tensor();
    return sdk::require_state_tensor(state, n, name, shape(p)).to(p.device(), at::kFloat).clone();
  };
  return s;
}

sdk::StateLayout adafactor_layout(bool beta1) {
  auto factored = [](const at::Tensor& p) { return p.dim() >= 2; };
  auto unfactored = [](const at::Tensor& p) { return p.dim() < 2; };
  auto same = [](const at::Tensor& p) { return p.sizes().vec(); };
  sdk::StateSlot exp_avg = statistic(
      "exp_avg", [beta1](const at::Tensor&) { return beta1; }, same);
  // Turning beta1 on mid-run starts the first moment at zero (created before the next update).
  auto load_exp_avg = exp_avg.load;
  exp_avg.load = [load_exp_avg](const sdk::TensorMap& state, const std::string& n, const at::Tensor& p) {
    return state.find(n + ".exp_avg") ? load_exp_avg(state, n, p) : at::Tensor();
  };
  return {"adafactor",
          "adafactor",
          {statistic("exp_avg_sq_row", factored, [](const at::Tensor& p) { return row_stat_shape(p.sizes()); }),
           statistic("exp_avg_sq_col", factored, [](const at::Tensor& p) { return col_stat_shape(p.sizes()); }),
           statistic("exp_avg_sq", unfactored, same), exp_avg}};
}

}  // namespace

Adafactor::Adafactor(const std::vector<sdk::ParamGroupSpec>& groups, const AdafactorOptions& options)
    : sdk::SlotOptimizer(groups, std::make_unique<AdafactorOptions>(options), options.weight_decay,
                         adafactor_layout(options.beta1.has_value())),
      options_(options) {}

double Adafactor::relative_step_size(size_t group, int64_t step) const {
  const double group_lr = param_groups_[group].options().get_lr();
  if (!options_.relative_step) return group_lr;
  const double t = static_cast<double>(step);
  const double min_step = options_.warmup_init ? 1e-6 * t : 1e-2;
  return std::min(min_step, 1.0 / std::sqrt(t)) * group_lr;  // group_lr: 1.0 x lr_scale x schedule
}

at::Tensor Adafactor::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  std::vector<AdafactorTensor> work;
  for_each_param_with_grad([&](const sdk::ParamRef& r, sdk::ParamSlots& s) {
    const at::Tensor& p = r.param;
    // Python-side scalars in double, rounded to fp32 where they meet a tensor.
    const double beta2t = 1.0 - std::pow(static_cast<double>(s.step), options_.decay_rate);
    AdafactorStepConfig c;
    c.eps1 = static_cast<float>(options_.eps.first);
    c.beta2t = static_cast<float>(beta2t);
    c.one_minus_beta2t = static_cast<float>(1.0 - beta2t);
    c.relative_step_size = relative_step_size(r.group, s.step);
    c.scale_parameter = options_.scale_parameter;
    c.eps2 = options_.eps.second;
    c.clip_threshold = options_.clip_threshold;
    c.use_beta1 = options_.beta1.has_value();
    c.beta1 = static_cast<float>(options_.beta1.value_or(0.0));
    c.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1.value_or(0.0));
    c.weight_decay = r.weight_decay;

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
      t.exp_avg_sq_row = s[kRow].data_ptr<float>();
      t.exp_avg_sq_col = s[kCol].data_ptr<float>();
    } else {
      t.exp_avg_sq = s[kExpAvgSq].data_ptr<float>();
    }
    t.exp_avg = c.use_beta1 ? s[kExpAvg].data_ptr<float>() : nullptr;
    t.config = c;
    work.push_back(t);
  });
  fused_adafactor_step(work);
  return guard.loss();
}

}  // namespace ftcore::plugins::adafactor

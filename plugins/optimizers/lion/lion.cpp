// optimizer/lion: options, its state slot, the step.
#include "lion.h"

#include "family_params.h"
#include "ftcore/sdk/option_fields.h"
#include "lion_kernel.h"
#include "state_codec.h"  // blockwise8: reads lion_8bit's 8-bit momentum too

namespace ftcore::plugins::lion {

sdk::ParamSpec lion_param_spec() {
  sdk::ParamSpec s;
  blockwise8::add_lion_family_params(s);  // lr, betas, weight_decay
  s.add_bool("decoupled_weight_decay", false)
      .with_doc("Divide weight_decay by the initial lr, so the decay does not follow the schedule (lion-pytorch).");
  return s;
}

LionOptions lion_options_from(const sdk::Options& options) {
  using O = LionOptions;
  return sdk::read_fields<O>(options, {{"lr", &O::lr}, {"betas", &O::betas}, {"weight_decay", &O::weight_decay},
                                       {"decoupled_weight_decay", &O::decoupled_weight_decay}});
}

namespace {

// fp32 as saved, or lion_8bit's 8-bit momentum dequantized (bitsandbytes'
// dequantize_blockwise). No step count: the update does not depend on it.
sdk::StateLayout lion_layout() {
  sdk::StateLayout layout{"lion", "lion", {blockwise8::fp32_moment_slot("exp_avg")}, /*saves_step=*/false};
  layout.was_stepped = [](const sdk::TensorMap& state, const std::string& n) {
    return blockwise8::has_moment(state, n, "exp_avg");
  };
  return layout;
}

}  // namespace

Lion::Lion(const std::vector<sdk::ParamGroupSpec>& groups, const LionOptions& options)
    : sdk::SlotOptimizer(groups, std::make_unique<LionOptions>(options), options.weight_decay, lion_layout()),
      options_(options) {}

at::Tensor Lion::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  const auto [beta1, beta2] = options_.betas;
  std::vector<LionTensor> work;
  for_each_param_with_grad([&](const sdk::ParamRef& p, sdk::ParamSlots& s) {
    double wd = p.weight_decay;
    // lion-pytorch divides by the lr the optimizer was built with, not the scheduled one.
    if (options_.decoupled_weight_decay) wd /= options_.lr;
    // Scalars in double, then rounded to fp32, as ATen rounds Python scalars.
    LionScalars sc;
    sc.decay = static_cast<float>(1.0 - p.lr * wd);
    sc.beta1 = static_cast<float>(beta1);
    sc.one_minus_beta1 = static_cast<float>(1.0 - beta1);
    sc.beta2 = static_cast<float>(beta2);
    sc.one_minus_beta2 = static_cast<float>(1.0 - beta2);
    sc.neg_lr = static_cast<float>(-p.lr);
    work.push_back({p.param.data_ptr(), p.param.grad().data_ptr(), s[0].data_ptr<float>(), p.param.numel(),
                    p.param.scalar_type(), sc});
  });
  fused_lion_step(work);
  return guard.loss();
}

}  // namespace ftcore::plugins::lion

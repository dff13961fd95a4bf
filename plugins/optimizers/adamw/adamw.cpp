// optimizer/adamw: its state slots and the step.
#include "adamw.h"

#include "adamw_kernel.h"
#include "state_codec.h"  // reads adamw_8bit's 8-bit moments too

namespace ftcore::plugins::adamw {
namespace {

enum Slot : size_t { kExpAvg, kExpAvgSq, kMaxExpAvgSq };

sdk::StateLayout adamw_layout(bool amsgrad) {
  sdk::StateSlot max_exp_avg_sq = sdk::fp32_slot("max_exp_avg_sq");
  if (!amsgrad) max_exp_avg_sq.make = [](const at::Tensor&) { return at::Tensor(); };
  max_exp_avg_sq.load = [amsgrad](const sdk::TensorMap& state, const std::string& n, const at::Tensor& p) {
    if (!amsgrad) return at::Tensor();
    if (state.find(n + ".max_exp_avg_sq"))
      return sdk::require_state_tensor(state, n, "max_exp_avg_sq", p.sizes()).to(p.device(), at::kFloat).clone();
    // Resuming AMSGrad from plain Adam state starts the maximum at the current moment.
    return blockwise8::read_moment_fp32(state, n, "exp_avg_sq", p.sizes()).to(p.device());
  };
  // The moments fp32 as saved, or adamw_8bit's 8-bit ones dequantized (bitsandbytes' dequantize_blockwise).
  return {"adamw",
          "adam",
          {blockwise8::fp32_moment_slot("exp_avg"), blockwise8::fp32_moment_slot("exp_avg_sq"), max_exp_avg_sq}};
}

}  // namespace

AdamW::AdamW(const std::vector<sdk::ParamGroupSpec>& groups, const AdamWOptions& options)
    : sdk::SlotOptimizer(groups, std::make_unique<AdamWOptions>(options), options.weight_decay,
                         adamw_layout(options.amsgrad)),
      options_(options) {}

at::Tensor AdamW::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  std::vector<AdamWTensor> work;
  for_each_param_with_grad([&](const sdk::ParamRef& p, sdk::ParamSlots& s) {
    work.push_back({p.param.data_ptr(), p.param.grad().data_ptr(), s[kExpAvg].data_ptr<float>(),
                    s[kExpAvgSq].data_ptr<float>(), options_.amsgrad ? s[kMaxExpAvgSq].data_ptr<float>() : nullptr,
                    p.param.numel(), p.param.scalar_type(),
                    adamw_scalars(p.lr, p.weight_decay, options_.betas, options_.eps, s.step)});
  });
  fused_adamw_step(work);
  return guard.loss();
}

sdk::TensorMap AdamW::state_by_name() const {
  sdk::TensorMap out = SlotOptimizer::state_by_name();
  out.metadata["amsgrad"] = options_.amsgrad ? "true" : "false";
  return out;
}

}  // namespace ftcore::plugins::adamw

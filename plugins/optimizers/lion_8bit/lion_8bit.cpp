// optimizer/lion_8bit: options, its state slots (either precision,
// converting on load) and the step (the fused CPU kernel, or the CUDA launcher).
#include "lion_8bit.h"

#include <ATen/ATen.h>

#include "blockwise8.h"
#include "family_params.h"
#include "ftcore/sdk/option_fields.h"
#include "optimizer_8bit.h"
#include "options_8bit.h"
#include "state_codec.h"

namespace ftcore::plugins::lion_8bit {

namespace b8 = blockwise8;

sdk::ParamSpec lion_8bit_param_spec() {
  sdk::ParamSpec s;
  b8::add_lion_family_params(s);  // lr, betas, weight_decay
  b8::add_8bit_state_params(s);
  return s;
}

Lion8bitOptions lion_8bit_options_from(const sdk::Options& options) {
  using O = Lion8bitOptions;
  return sdk::read_fields<O>(options, {{"lr", &O::lr}, {"betas", &O::betas}, {"weight_decay", &O::weight_decay}},
                             O(b8::state_8bit_options_from(options, "lion_8bit")));
}

namespace {

enum Slot : size_t { kCodes1, kAbsmax1, kExpAvg32, kGnormVec };

// Same family: lion's fp32 momentum is quantized, 8-bit taken as saved.
// optimizer/lion saves no step count; here it only indexes the clipping history.
sdk::StateLayout lion_8bit_layout(const Lion8bitOptions& o) {
  const b8::KeepsForm eight_bit = b8::keeps_8bit(o.min_8bit_size), fp32 = b8::keeps_fp32(o.min_8bit_size);
  sdk::StateLayout layout{
      "lion_8bit",
      "lion",
      {b8::codes_slot("exp_avg", eight_bit), b8::absmax_slot("exp_avg", eight_bit),
       b8::fp32_moment_slot("exp_avg", fp32), b8::gnorm_history_slot(o.percentile_clipping, "lion_8bit")}};
  layout.was_stepped = [](const sdk::TensorMap& state, const std::string& n) {
    return b8::has_moment(state, n, "exp_avg");
  };
  return layout;
}

}  // namespace

Lion8bit::Lion8bit(const std::vector<sdk::ParamGroupSpec>& groups, const Lion8bitOptions& options)
    : SlotOptimizer8bit(groups, std::make_unique<Lion8bitOptions>(options), options.weight_decay,
                         lion_8bit_layout(options)),
      options_(options) {}

at::Tensor Lion8bit::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  const auto [beta1, beta2] = options_.betas;
  std::vector<b8::Lion8bitTensor> work;
  for_each_param_with_grad([&](const sdk::ParamRef& r, sdk::ParamSlots& s) {
    const at::Tensor& p = r.param;
    const double wd = r.weight_decay;
    const float gnorm_scale = b8::gradient_clipping_scale(p.grad(), s[kGnormVec], s.step, options_.percentile_clipping);
    const b8::Lion8bitScalars sc = b8::lion8bit_scalars(r.lr, beta1, beta2, wd, gnorm_scale);
    if (p.is_cuda()) {
      b8::lion8bit_cuda_step(p,
                             {s[kCodes1].defined() ? s[kCodes1].data_ptr<uint8_t>() : nullptr,
                              s[kCodes1].defined() ? s[kAbsmax1].data_ptr<float>() : nullptr, s[kExpAvg32]},
                             sc, r.lr, wd, gnorm_scale, device_maps_);
      return;
    }
    auto t = b8::work_item<b8::Lion8bitTensor>(p, sc);
    if (s[kCodes1].defined()) {
      t.state1 = s[kCodes1].data_ptr<uint8_t>();
      t.absmax1 = s[kAbsmax1].data_ptr<float>();
    } else {
      t.exp_avg32 = s[kExpAvg32].data_ptr<float>();
    }
    work.push_back(t);
  });
  b8::fused_lion8bit_step(work);
  return guard.loss();
}

}  // namespace ftcore::plugins::lion_8bit

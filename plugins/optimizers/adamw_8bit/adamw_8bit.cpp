// optimizer/adamw_8bit: its state slots (either precision, converting on
// load) and the step (the fused CPU kernel, or the CUDA launcher).
#include "adamw_8bit.h"

#include "blockwise8.h"
#include "optimizer_8bit.h"
#include "state_codec.h"

namespace ftcore::plugins::adamw_8bit {

namespace b8 = blockwise8;

namespace {

enum Slot : size_t { kCodes1, kAbsmax1, kCodes2, kAbsmax2, kExpAvg32, kExpAvgSq32, kGnormVec };

// Same family: adamw's fp32 moments are quantized, 8-bit ones taken as saved
// (or dequantized for tensors that keep fp32 state here).
sdk::StateLayout adamw_8bit_layout(const AdamW8bitOptions& o) {
  const b8::KeepsForm eight_bit = b8::keeps_8bit(o.min_8bit_size), fp32 = b8::keeps_fp32(o.min_8bit_size);
  return {"adamw_8bit",
          "adam",
          {b8::codes_slot("exp_avg", eight_bit), b8::absmax_slot("exp_avg", eight_bit),
           b8::codes_slot("exp_avg_sq", eight_bit), b8::absmax_slot("exp_avg_sq", eight_bit),
           b8::fp32_moment_slot("exp_avg", fp32), b8::fp32_moment_slot("exp_avg_sq", fp32),
           b8::gnorm_history_slot(o.percentile_clipping, "adamw_8bit")}};
}

}  // namespace

AdamW8bit::AdamW8bit(const std::vector<sdk::ParamGroupSpec>& groups, const AdamW8bitOptions& options)
    : SlotOptimizer8bit(groups, std::make_unique<AdamW8bitOptions>(options), options.weight_decay,
                         adamw_8bit_layout(options)),
      options_(options) {}

at::Tensor AdamW8bit::step(LossClosure closure) {
  sdk::StepGuard guard(closure);
  std::vector<b8::Adam8bitTensor> work;
  for_each_param_with_grad([&](const sdk::ParamRef& r, sdk::ParamSlots& s) {
    const at::Tensor& p = r.param;
    const float gnorm_scale = b8::gradient_clipping_scale(p.grad(), s[kGnormVec], s.step, options_.percentile_clipping);
    const b8::Adam8bitScalars sc = b8::adam8bit_scalars(r.lr, options_.betas.first, options_.betas.second, options_.eps,
                                                        r.weight_decay, s.step, gnorm_scale);
    const bool eight_bit = s[kCodes1].defined();
    if (p.is_cuda()) {
      b8::CudaAdamState state;
      if (eight_bit) {
        state = {s[kCodes1].data_ptr<uint8_t>(), s[kCodes2].data_ptr<uint8_t>(), s[kAbsmax1].data_ptr<float>(),
                 s[kAbsmax2].data_ptr<float>()};
      } else {
        state.exp_avg32 = s[kExpAvg32];
        state.exp_avg_sq32 = s[kExpAvgSq32];
      }
      b8::adam8bit_cuda_step(p, state, sc, r.lr, r.weight_decay, options_.betas, s.step, gnorm_scale, device_maps_);
      return;
    }
    auto t = b8::work_item<b8::Adam8bitTensor>(p, sc);
    if (eight_bit) {
      t.state1 = s[kCodes1].data_ptr<uint8_t>();
      t.state2 = s[kCodes2].data_ptr<uint8_t>();
      t.absmax1 = s[kAbsmax1].data_ptr<float>();
      t.absmax2 = s[kAbsmax2].data_ptr<float>();
    } else {
      t.exp_avg32 = s[kExpAvg32].data_ptr<float>();
      t.exp_avg_sq32 = s[kExpAvgSq32].data_ptr<float>();
    }
    work.push_back(t);
  });
  b8::fused_adam8bit_step(work);
  return guard.loss();
}

}  // namespace ftcore::plugins::adamw_8bit

// optimizer/lion_8bit: options, its state slots (either precision,
// converting on load) and the step (the fused CPU kernel, or the CUDA launcher).
#include "lion_8bit.h"

#include <ATen/ATen.h>

#include "blockwise8.h"
#include "optimizer_8bit.h"
#include "options_8bit.h"
#include "state_codec.h"
#if FTCORE_CUDA_KERNELS
#include "cuda_kernels.h"
#endif

namespace ftcore::plugins::lion_8bit {

namespace b8 = blockwise8;

sdk::ParamSpec lion_8bit_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-4)
      .above(0.0)
      .with_doc(
          "Base learning rate (scaled per group by lr_scale and the scheduler); Lion wants 3-10x less than AdamW.");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.99})
      .with_range(0.0, 1.0)
      .with_doc("beta1 interpolates the update direction, beta2 decays the momentum.");
  s.add_float("weight_decay", 0.0)
      .at_least(0.0)
      .with_doc("Decoupled weight decay, p *= 1 - lr * weight_decay (groups may override).");
  b8::add_8bit_state_params(s);
  return s;
}

Lion8bitOptions lion_8bit_options_from(const sdk::Options& options) {
  b8::require_block_wise(options, "lion_8bit");
  Lion8bitOptions o;
  o.lr = options.get_float("lr");
  o.betas = options.get_pair("betas");
  o.weight_decay = options.get_float("weight_decay");
  o.min_8bit_size = options.get_int("min_8bit_size");
  o.percentile_clipping = options.get_int("percentile_clipping");
  return o;
}

namespace {

enum Slot : size_t { kCodes1, kAbsmax1, kExpAvg32, kGnormVec };

// Same family: lion's fp32 momentum is quantized, 8-bit taken as saved.
// optimizer/lion saves no step count; here it only indexes the clipping history.
sdk::StateLayout lion_8bit_layout(const Lion8bitOptions& o) {
  const int64_t min_8bit_size = o.min_8bit_size;
  const b8::KeepsForm eight_bit = [min_8bit_size](const at::Tensor& p) { return p.numel() >= min_8bit_size; };
  const b8::KeepsForm fp32 = [min_8bit_size](const at::Tensor& p) { return p.numel() < min_8bit_size; };
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
    : sdk::SlotOptimizer(groups, std::make_unique<Lion8bitOptions>(options), options.weight_decay,
                         lion_8bit_layout(options)),
      options_(options) {}

void Lion8bit::check_parameter(size_t group, size_t index) const {
  check_fused_cpu_or_cuda_parameter(group, index, b8::kCudaKernels);
}

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
#if FTCORE_CUDA_KERNELS
      const at::Tensor grad = p.grad().contiguous();
      if (!s[kCodes1].defined()) {  // fp32 state: bitsandbytes' 32-bit rule in ATen ops on the device
        at::Tensor& m32 = s[kExpAvg32];
        const at::Tensor gf = grad.to(at::kFloat) * gnorm_scale;
        at::Tensor pf = p.to(at::kFloat);
        if (wd > 0.0) pf.mul_(sc.decay);
        pf.add_(m32.mul(sc.beta1).add_(gf, sc.one_minus_beta1).sign_(), sc.neg_lr);
        m32.mul_(sc.beta2).add_(gf, sc.one_minus_beta2);
        if (pf.data_ptr() != p.data_ptr()) p.copy_(pf);
        return;
      }
      cuda::Lion8bitArgs a;
      a.param = p.data_ptr();
      a.grad = grad.data_ptr();
      a.dtype = p.scalar_type() == at::kFloat      ? cuda::DType::F32
                : p.scalar_type() == at::kBFloat16 ? cuda::DType::BF16
                                                   : cuda::DType::F16;
      a.numel = p.numel();
      a.state1 = s[kCodes1].data_ptr<uint8_t>();
      a.absmax1 = s[kAbsmax1].data_ptr<float>();
      a.qmap1 = b8::device_quant_maps(device_maps_, p.device()).data_ptr<float>();  // the signed map
      a.beta1 = sc.beta1;
      a.beta2 = sc.beta2;
      a.lr = static_cast<float>(r.lr);
      a.weight_decay = static_cast<float>(wd);
      a.gnorm_scale = gnorm_scale;
      cuda::lion8bit_blockwise_step(a, nullptr);
#endif
      return;
    }
    b8::Lion8bitTensor t;
    t.param = p.data_ptr();
    t.grad = p.grad().data_ptr();
    t.numel = p.numel();
    t.dtype = p.scalar_type();
    if (s[kCodes1].defined()) {
      t.state1 = s[kCodes1].data_ptr<uint8_t>();
      t.absmax1 = s[kAbsmax1].data_ptr<float>();
    } else {
      t.exp_avg32 = s[kExpAvg32].data_ptr<float>();
    }
    t.scalars = sc;
    work.push_back(t);
  });
  b8::fused_lion8bit_step(work);
  return guard.loss();
}

}  // namespace ftcore::plugins::lion_8bit

// Clipping, its history slot and the CUDA side of the 8-bit optimizers (optimizer_8bit.h).
#include "optimizer_8bit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <ATen/ATen.h>

#include "blockwise8.h"
#if FTCORE_CUDA_KERNELS
#include "cuda_kernels.h"
#endif

namespace ftcore::plugins::blockwise8 {

#if FTCORE_CUDA_KERNELS
namespace {

// The parameter part of a launcher's arguments (cuda::Adam8bitArgs, Lion8bitArgs).
template <typename Args>
void set_tensor_args(Args& a, const at::Tensor& p, const at::Tensor& grad) {
  a.param = p.data_ptr();
  a.grad = grad.data_ptr();
  a.dtype = p.scalar_type() == at::kFloat      ? cuda::DType::F32
            : p.scalar_type() == at::kBFloat16 ? cuda::DType::BF16
                                               : cuda::DType::F16;
  a.numel = p.numel();
}

}  // namespace
#endif

float gradient_clipping_scale(const at::Tensor& grad, at::Tensor& gnorm_vec, int64_t step, int64_t percentile) {
  if (percentile >= 100) return 1.0f;
  const double n2 = grad.is_cuda() ? grad.to(at::kDouble).square().sum().item<double>()
                                   : grad_square_sum(grad.data_ptr(), grad.numel(), grad.scalar_type());
  return percentile_clipping_scale(gnorm_vec.data_ptr<float>(), step, percentile, n2);
}

sdk::StateSlot gnorm_history_slot(int64_t percentile, const std::string& owner) {
  sdk::StateSlot s;
  s.name = "gnorm_vec";
  s.make = [percentile](const at::Tensor&) {
    return percentile < 100 ? at::zeros({100}, at::TensorOptions().dtype(at::kFloat)) : at::Tensor();
  };
  s.load = [owner](const sdk::TensorMap& state, const std::string& n, const at::Tensor&) {
    const at::Tensor* gv = state.find(n + ".gnorm_vec");
    if (!gv) return at::Tensor();
    if (gv->numel() != 100 || gv->scalar_type() != at::kFloat)
      throw std::runtime_error(owner + ": state tensor " + n + ".gnorm_vec must be fp32[100]");
    return gv->to(at::kCPU).contiguous().clone();
  };
  return s;
}

const at::Tensor& device_quant_maps(at::Tensor& cache, at::Device device) {
  if (!cache.defined() || cache.device() != device) {
    const auto& m1 = signed_quant_map().code;
    const auto& m2 = unsigned_quant_map().code;
    at::Tensor maps = at::empty({2, 256}, at::TensorOptions().dtype(at::kFloat));
    std::copy(m1.begin(), m1.end(), maps.data_ptr<float>());
    std::copy(m2.begin(), m2.end(), maps.data_ptr<float>() + 256);
    cache = maps.to(device);
  }
  return cache;
}

void adam8bit_cuda_step(const at::Tensor& p, const CudaAdamState& s, const Adam8bitScalars& sc, double lr, double wd,
                        std::pair<double, double> betas, int64_t step, float gnorm_scale, at::Tensor& maps_cache) {
#if FTCORE_CUDA_KERNELS
  const at::Tensor grad = p.grad().contiguous();
  if (!s.codes1) {  // fp32 state: bitsandbytes' 32-bit rule in ATen ops on the device
    at::Tensor m = s.exp_avg32, v = s.exp_avg_sq32;
    const at::Tensor gf = grad.to(at::kFloat) * gnorm_scale;
    m.mul_(sc.beta1).add_(gf, sc.one_minus_beta1);
    v.mul_(sc.beta2).addcmul_(gf, gf, sc.one_minus_beta2);
    at::Tensor pf = p.to(at::kFloat);
    if (wd > 0.0) pf.mul_(sc.decay);
    pf.add_(m / (v.sqrt() + sc.eps_bc2), sc.step_size32);
    if (pf.data_ptr() != p.data_ptr()) p.copy_(pf);
    return;
  }
  const at::Tensor& maps = device_quant_maps(maps_cache, p.device());
  cuda::Adam8bitArgs a;
  set_tensor_args(a, p, grad);
  a.state1 = s.codes1;
  a.state2 = s.codes2;
  a.absmax1 = s.absmax1;
  a.absmax2 = s.absmax2;
  a.qmap1 = maps.data_ptr<float>();
  a.qmap2 = maps.data_ptr<float>() + 256;
  a.beta1 = sc.beta1;
  a.beta2 = sc.beta2;
  a.eps = sc.eps;
  a.lr = static_cast<float>(lr);
  a.weight_decay = static_cast<float>(wd);
  a.bias_correction1 = static_cast<float>(1.0 - std::pow(betas.first, static_cast<double>(step)));
  a.bias_correction2 = static_cast<float>(1.0 - std::pow(betas.second, static_cast<double>(step)));
  a.gnorm_scale = gnorm_scale;
  cuda::adam8bit_blockwise_step(a, nullptr);
#else
  (void)p, (void)s, (void)sc, (void)lr, (void)wd, (void)betas, (void)step, (void)gnorm_scale, (void)maps_cache;
  throw std::invalid_argument("adam8bit_cuda_step: this build has no CUDA kernels");
#endif
}

void lion8bit_cuda_step(const at::Tensor& p, const CudaLionState& s, const Lion8bitScalars& sc, double lr, double wd,
                        float gnorm_scale, at::Tensor& maps_cache) {
#if FTCORE_CUDA_KERNELS
  const at::Tensor grad = p.grad().contiguous();
  if (!s.codes1) {  // fp32 state: bitsandbytes' 32-bit rule in ATen ops on the device
    at::Tensor m32 = s.exp_avg32;
    const at::Tensor gf = grad.to(at::kFloat) * gnorm_scale;
    at::Tensor pf = p.to(at::kFloat);
    if (wd > 0.0) pf.mul_(sc.decay);
    pf.add_(m32.mul(sc.beta1).add_(gf, sc.one_minus_beta1).sign_(), sc.neg_lr);
    m32.mul_(sc.beta2).add_(gf, sc.one_minus_beta2);
    if (pf.data_ptr() != p.data_ptr()) p.copy_(pf);
    return;
  }
  cuda::Lion8bitArgs a;
  set_tensor_args(a, p, grad);
  a.state1 = s.codes1;
  a.absmax1 = s.absmax1;
  a.qmap1 = device_quant_maps(maps_cache, p.device()).data_ptr<float>();  // the signed map
  a.beta1 = sc.beta1;
  a.beta2 = sc.beta2;
  a.lr = static_cast<float>(lr);
  a.weight_decay = static_cast<float>(wd);
  a.gnorm_scale = gnorm_scale;
  cuda::lion8bit_blockwise_step(a, nullptr);
#else
  (void)p, (void)s, (void)sc, (void)lr, (void)wd, (void)gnorm_scale, (void)maps_cache;
  throw std::invalid_argument("lion8bit_cuda_step: this build has no CUDA kernels");
#endif
}

}  // namespace ftcore::plugins::blockwise8

// The fused 8-bit steps: scalars as bitsandbytes rounds them, and the SDK's
// multi-tensor scheduler over this library's per-ISA chunk kernels.
#include "optim8bit_kernel.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "ftcore/sdk/cpu_isa.h"
#include "ftcore/sdk/multi_tensor.h"

namespace ftcore::plugins::blockwise8 {
namespace {

const Optim8bitKernels& kernels() {
  static const Optim8bitKernels chosen = sdk::cpu_has_avx512_vbmi()
                                             ? avx512vbmi_kernels()
                                             : sdk::kernels_for_this_cpu(&generic_kernels, &avx2_kernels, &avx512_kernels);
  return chosen;
}

template <typename T>
double square_sum(const T* g, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<float>(g[i]);
    acc += x * x;
  }
  return acc;
}

}  // namespace

Adam8bitScalars adam8bit_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                 int64_t step, float gnorm_scale) {
  // Python floats in bitsandbytes (double), rounded to fp32 where ATen takes them as scalars.
  const double correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double correction2 = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  Adam8bitScalars s;
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.decay = weight_decay > 0.0 ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
  s.eps = static_cast<float>(eps);
  s.bias_correction2_sqrt = static_cast<float>(correction2);
  s.neg_lr_over_bc1 = static_cast<float>(-lr / correction1);
  s.eps_bc2 = static_cast<float>(eps * correction2);
  s.step_size32 = static_cast<float>(-lr * correction2 / correction1);
  s.gnorm_scale = gnorm_scale;
  return s;
}

Lion8bitScalars lion8bit_scalars(double lr, double beta1, double beta2, double weight_decay, float gnorm_scale) {
  Lion8bitScalars s;
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.decay = weight_decay > 0.0 ? static_cast<float>(1.0 - lr * weight_decay) : 1.0f;
  s.neg_lr = static_cast<float>(-lr);
  s.gnorm_scale = gnorm_scale;
  return s;
}

void fused_adam8bit_step(const std::vector<Adam8bitTensor>& tensors) {
  sdk::run_multi_tensor(tensors, kernels().adam, "adamw_8bit");
}

void fused_lion8bit_step(const std::vector<Lion8bitTensor>& tensors) {
  sdk::run_multi_tensor(tensors, kernels().lion, "lion_8bit");
}

double grad_square_sum(const void* grad, int64_t numel, c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return square_sum(static_cast<const float*>(grad), numel);
    case c10::kBFloat16: return square_sum(static_cast<const c10::BFloat16*>(grad), numel);
    case c10::kHalf: return square_sum(static_cast<const c10::Half*>(grad), numel);
    default: return 0.0;
  }
}

float percentile_clipping_scale(float* gnorm_vec, int64_t step, int64_t percentile, double grad_square_sum) {
  const float n2 = static_cast<float>(grad_square_sum);
  if (step == 1) {
    std::fill(gnorm_vec, gnorm_vec + 100, n2);
  } else {
    gnorm_vec[step % 100] = n2;
  }
  const float current = std::sqrt(gnorm_vec[step % 100]);
  std::array<float, 100> sorted;
  std::copy(gnorm_vec, gnorm_vec + 100, sorted.begin());
  std::sort(sorted.begin(), sorted.end());
  const float clip = std::sqrt(sorted[static_cast<size_t>(std::clamp<int64_t>(percentile, 0, 99))]);
  return current > clip ? clip / current : 1.0f;
}

}  // namespace ftcore::plugins::blockwise8

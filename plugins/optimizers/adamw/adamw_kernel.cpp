// The fused AdamW step over all tensors: the per-step scalars, and the SDK's
// multi-tensor scheduler with this library's per-ISA chunk kernels.
#include "adamw_kernel.h"

#include <cmath>

#include "ftcore/sdk/multi_tensor.h"

namespace ftcore::plugins::adamw {

AdamWScalars adamw_scalars(double lr, double weight_decay, std::pair<double, double> betas, double eps, int64_t step) {
  const auto [beta1, beta2] = betas;
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(beta1, t);
  const double bias_correction2 = 1.0 - std::pow(beta2, t);
  AdamWScalars sc;
  sc.decay = static_cast<float>(1.0 - lr * weight_decay);
  sc.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  sc.lerp_from_end = std::abs(1.0 - beta1) >= 0.5;
  sc.beta2 = static_cast<float>(beta2);
  sc.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  sc.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  sc.eps = static_cast<float>(eps);
  sc.neg_step_size = static_cast<float>(-(lr / bias_correction1));
  return sc;
}

void fused_adamw_step(const std::vector<AdamWTensor>& tensors) {
  sdk::run_multi_tensor(tensors, sdk::kernels_for_this_cpu(&generic_kernels, &avx2_kernels, &avx512_kernels), "adamw");
}

}  // namespace ftcore::plugins::adamw

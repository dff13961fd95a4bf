// The fused multi-tensor AdamW update: one pass over every tensor of a step,
// reading p, g, m, v once and writing p, m, v once (torch::optim::AdamW makes
// about ten passes with separate ops per tensor). Work is cut into chunks
// across all tensors and spread over threads with sdk::parallel_for; each
// chunk runs the widest ISA variant this CPU supports (AVX-512, AVX2, generic).
//
// The arithmetic mirrors torch.optim.AdamW (single-tensor path) operation by
// operation in fp32, so results agree to rounding:
//   p <- p * (1 - lr*wd)                                   decoupled decay
//   m <- lerp(m, g, 1 - beta1)                             first moment
//   v <- v * beta2 + (1 - beta2) * g * g                   second moment
//   vmax <- max(vmax, v)  (amsgrad; the denominator uses vmax)
//   denom <- sqrt(v) / sqrt(1 - beta2^t) + eps
//   p <- p + (-lr / (1 - beta1^t)) * m / denom
// Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019,
// https://arxiv.org/abs/1711.05101
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <c10/core/ScalarType.h>

namespace ftcore::plugins::adamw {

// Per-tensor scalars of one step, already rounded to fp32 as torch does.
struct AdamWScalars {
  float decay;          // 1 - lr * weight_decay
  float one_minus_beta1;
  bool lerp_from_end;   // torch's lerp uses end - (end - self) * (1 - w) when |w| >= 0.5
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^t)
};

struct AdamWTensor {
  void* param;              // dtype: float, bfloat16 or half
  const void* grad;         // same dtype as param
  float* exp_avg;
  float* exp_avg_sq;
  float* max_exp_avg_sq;    // null unless amsgrad
  int64_t numel;
  c10::ScalarType dtype;
  AdamWScalars scalars;
};

// The scalars of update number `step` (1 on the first): in double, then
// rounded to fp32, as torch's Python-side math does.
AdamWScalars adamw_scalars(double lr, double weight_decay, std::pair<double, double> betas, double eps, int64_t step);

// Elements [begin, end) of one tensor; one function per ISA and dtype.
using ChunkUpdate = void (*)(const AdamWTensor& t, int64_t begin, int64_t end);

struct ChunkKernels {
  ChunkUpdate f32, bf16, f16;
};
ChunkKernels generic_kernels();
ChunkKernels avx2_kernels();
ChunkKernels avx512_kernels();

// Updates every tensor in one fused, parallel pass.
void fused_adamw_step(const std::vector<AdamWTensor>& tensors);

}  // namespace ftcore::plugins::adamw

// The fused multi-tensor Lion update: one pass over every tensor of a step,
// reading p, g, m once and writing p, m once (lion-pytorch makes about eight
// passes and two parameter-sized temporaries per tensor). Work is cut into
// chunks across all tensors and spread over threads with sdk::parallel_for;
// each chunk runs the widest ISA variant this CPU supports (AVX-512, AVX2,
// generic).
//
// Chen et al., "Symbolic Discovery of Optimization Algorithms", 2023,
// https://arxiv.org/abs/2302.06675, as the lion-pytorch package computes it:
//   p <- p * (1 - lr*wd)                       decoupled weight decay
//   c <- beta1*m + (1 - beta1)*g               interpolation, one fused multiply-add
//   p <- p - lr * sign(c)                      sign(0) = sign(NaN) = 0, as torch.sgn
//   m <- beta2*m + (1 - beta2)*g               momentum, one fused multiply-add
// Every fp32 operation rounds where ATen's does (add with alpha is
// fmadd(other, alpha, self) in ATen's vector and scalar code alike), so on
// fp32 parameters the result is bit-identical to lion-pytorch's.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/ScalarType.h>

namespace ftcore::plugins::lion {

// Per-tensor scalars of one step, rounded to fp32 as ATen rounds Python scalars.
struct LionScalars {
  float decay;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float neg_lr;
};

struct LionTensor {
  void* param;        // dtype: float, bfloat16 or half
  const void* grad;   // same dtype as param
  float* exp_avg;     // fp32 whatever the parameter dtype
  int64_t numel;
  c10::ScalarType dtype;
  LionScalars scalars;
};

// Elements [begin, end) of one tensor; one function per ISA and dtype.
using ChunkUpdate = void (*)(const LionTensor& t, int64_t begin, int64_t end);

struct ChunkKernels {
  ChunkUpdate f32, bf16, f16;
};
ChunkKernels generic_kernels();
ChunkKernels avx2_kernels();
ChunkKernels avx512_kernels();

// Updates every tensor in one fused, parallel pass.
void fused_lion_step(const std::vector<LionTensor>& tensors);

}  // namespace ftcore::plugins::lion

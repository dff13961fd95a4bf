// The fused 8-bit optimizer steps over blockwise-quantized state, as
// bitsandbytes' 8-bit blockwise optimizers compute them (Dettmers et al.
// 2022, "8-bit Optimizers via Block-wise Quantization",
// https://arxiv.org/abs/2110.02861; bitsandbytes 0.50's CPU
// optimizer_update_8bit_blockwise / optimizer_update_32bit give the order of
// operations and every fp32 rounding). One pass over every tensor of a step:
// per 256-element block the state is dequantized with the old absmax, updated
// in fp32, the parameter is updated from the fp32 state, and the state is
// requantized with the block's new absmax (blockwise8.h; the AVX-512 build
// does both in registers, code_search_avx512.h). Chunks of the
// SDK's multi-tensor scheduler start at multiples of 65536, so every block
// lies in one chunk. Compiled for generic x86-64, AVX2, AVX-512 and AVX-512
// with VBMI, chosen at run time (sdk/cpu_isa.h; FTCORE_CPU_ISA caps the choice).
//
// Adam (AdamW: decoupled weight decay), 8-bit state, g <- g * gnorm_scale:
//   m <- beta1*m + (1-beta1)*g                  fused: fma(g, 1-beta1, m*beta1)
//   v <- beta2*v + (1-beta2)*g*g                fused: fma((1-beta2)*g, g, v*beta2)
//   denom <- sqrt(v) / sqrt(1-beta2^t) + eps
//   p <- p * (1 - lr*wd)                        (wd > 0)
//   p <- p + (-lr/(1-beta1^t)) * m / denom
// Adam, fp32 state (tensors below min_8bit_size, bitsandbytes' 32-bit kernel):
//   m, v as above;  p <- p * (1 - lr*wd);
//   p <- p + (-lr*sqrt(1-beta2^t)/(1-beta1^t)) * (m / (sqrt(v) + eps*sqrt(1-beta2^t)))
// Lion (Chen et al. 2023, https://arxiv.org/abs/2302.06675), 8-bit state:
//   p <- p * (1 - lr*wd)                        (wd > 0)
//   p <- p - lr * sign(m*beta1 + g*(1-beta1))   two rounded products, then the sum
//   m <- beta2*m + (1-beta2)*g                  fused
// Lion, fp32 state: the same with the interpolation fused, fma(g, 1-beta1, m*beta1).
//
// State layout (identical on the CPU and CUDA): codes uint8[numel] with the
// signed dynamic map for m and the unsigned one for v, absmax
// fp32[ceil(numel/256)] per state.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/ScalarType.h>

namespace ftcore::plugins::blockwise8 {

// Per-tensor scalars of one step, rounded to fp32 as ATen rounds bitsandbytes' Python scalars.
struct Adam8bitScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float decay;                 // 1 - lr*wd (1 when wd == 0)
  float eps;
  float bias_correction2_sqrt; // sqrt(1 - beta2^t)         (8-bit)
  float neg_lr_over_bc1;       // -lr / (1 - beta1^t)         (8-bit)
  float eps_bc2;               // eps * sqrt(1 - beta2^t)     (fp32 state)
  float step_size32;           // -lr * sqrt(1 - beta2^t) / (1 - beta1^t)  (fp32 state)
  float gnorm_scale;           // percentile clipping's factor (1: none)
};
// step: 1 on the first update.
Adam8bitScalars adam8bit_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                                 int64_t step, float gnorm_scale);

struct Adam8bitTensor {
  void* param;        // float, bfloat16 or half
  const void* grad;   // same dtype as param
  int64_t numel;
  c10::ScalarType dtype;
  // 8-bit state (state1/absmax1: exp_avg; state2/absmax2: exp_avg_sq) ...
  uint8_t* state1 = nullptr;
  uint8_t* state2 = nullptr;
  float* absmax1 = nullptr;
  float* absmax2 = nullptr;
  // ... or fp32 state (both null above).
  float* exp_avg32 = nullptr;
  float* exp_avg_sq32 = nullptr;
  Adam8bitScalars scalars;
};

struct Lion8bitScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float decay;   // 1 - lr*wd
  float neg_lr;
  float gnorm_scale;
};
Lion8bitScalars lion8bit_scalars(double lr, double beta1, double beta2, double weight_decay, float gnorm_scale);

struct Lion8bitTensor {
  void* param;
  const void* grad;
  int64_t numel;
  c10::ScalarType dtype;
  uint8_t* state1 = nullptr;  // exp_avg codes, or null with exp_avg32
  float* absmax1 = nullptr;
  float* exp_avg32 = nullptr;
  Lion8bitScalars scalars;
};

// CPU buffers. Each updates every tensor in one fused, parallel pass.
void fused_adam8bit_step(const std::vector<Adam8bitTensor>& tensors);
void fused_lion8bit_step(const std::vector<Lion8bitTensor>& tensors);

// Per-ISA chunk kernels (elements [begin, end), begin a multiple of 256).
struct Adam8bitKernels {
  void (*f32)(const Adam8bitTensor&, int64_t, int64_t);
  void (*bf16)(const Adam8bitTensor&, int64_t, int64_t);
  void (*f16)(const Adam8bitTensor&, int64_t, int64_t);
};
struct Lion8bitKernels {
  void (*f32)(const Lion8bitTensor&, int64_t, int64_t);
  void (*bf16)(const Lion8bitTensor&, int64_t, int64_t);
  void (*f16)(const Lion8bitTensor&, int64_t, int64_t);
};
struct Optim8bitKernels {
  Adam8bitKernels adam;
  Lion8bitKernels lion;
  // The ISA's block codec over a whole state (blocks of 256; codes[numel],
  // absmax[ceil(numel/256)]), equal to quantize_blockwise / dequantize_blockwise
  // with the signed or unsigned dynamic map; what the steps use, exposed for tests.
  void (*quantize_state)(const float* x, int64_t numel, bool is_signed, uint8_t* codes, float* absmax);
  void (*dequantize_state)(const uint8_t* codes, const float* absmax, int64_t numel, bool is_signed, float* out);
};
Optim8bitKernels generic_kernels();
Optim8bitKernels avx2_kernels();
Optim8bitKernels avx512_kernels();
Optim8bitKernels avx512vbmi_kernels();  // AVX-512 with byte permutes (sdk::cpu_has_avx512_vbmi)

// The sum of squares of a gradient (double accumulation, rounded to fp32 by
// the caller's history), for percentile clipping.
double grad_square_sum(const void* grad, int64_t numel, c10::ScalarType dtype);

// Percentile clipping as bitsandbytes <= 0.49 defined it per parameter
// (removed in 0.50): gnorm_vec[100] keeps the squared gradient norms of the
// last 100 steps (step 1 fills all 100); with n2 = ||g||^2 of this step
//   gnorm_vec[step % 100] <- n2;  current <- sqrt(n2)
//   clip <- sqrt(sorted(gnorm_vec)[percentile])
//   gnorm_scale <- clip / current if current > clip, else 1      (fp32)
// Updates gnorm_vec and returns gnorm_scale. step: 1 on the first update.
float percentile_clipping_scale(float* gnorm_vec, int64_t step, int64_t percentile, double grad_square_sum);

}  // namespace ftcore::plugins::blockwise8

// The fused multi-tensor Adafactor update, without a parameter-sized
// temporary (transformers' Adafactor allocates four or five per tensor).
//
// Shazeer & Stern, "Adafactor: Adaptive Learning Rates with Sublinear Memory
// Cost", 2018, https://arxiv.org/abs/1804.04235, as transformers.optimization.
// Adafactor computes it. For a parameter p with gradient g at step t (dims:
// B leading matrices of M rows x N columns; B = 1 for a matrix):
//   beta2t = 1 - t^decay_rate
//   G      = g*g + eps1
//   factored (p has >= 2 dims):
//     R[b,i] <- beta2t*R[b,i] + (1-beta2t) * mean_j G[b,i,j]        exp_avg_sq_row
//     C[b,j] <- beta2t*C[b,j] + (1-beta2t) * mean_i G[b,i,j]        exp_avg_sq_col
//     u[b,i,j] = rsqrt(R[b,i] / mean_i R[b,i]) * rsqrt(C[b,j]) * g  (a rank-1 estimate of 1/sqrt(v))
//   otherwise:
//     V <- beta2t*V + (1-beta2t)*G;  u = rsqrt(V) * g                exp_avg_sq
//   u     <- u / max(1, RMS(u) / clip_threshold)                     update clipping
//   lr     = max(eps2, RMS(p)) * rho   (scale_parameter; else rho)
//   rho    = relative_step ? min(warmup_init ? 1e-6*t : 1e-2, 1/sqrt(t)) : group lr
//   u     <- lr * u;  with beta1: m <- beta1*m + (1-beta1)*u, u = m  exp_avg
//   p     <- p - weight_decay*lr*p - u
//
// Passes, each one sdk::parallel_for over row chunks of all tensors:
//   1. statistics: RMS(p), row means and per-chunk column sums of G
//      (unfactored tensors: V's update and RMS(u) here too);
//   2. per tensor: R, C, their rsqrt factors, lr (small vectors only);
//   3. RMS(u) of factored tensors, recomputing u from the factors;
//   4. the update, recomputing u again.
// Elementwise fp32 operations round where ATen's do (its add(alpha) is a fused
// multiply-add); sums are taken in double over a chunking that does not
// depend on the thread count or the ISA, so every run is reproducible and the
// ISA variants agree bit for bit. transformers sums in fp32 (norm, mean),
// which is where the two differ: a few ulps in RMS and the means.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/ScalarType.h>

namespace ftcore::plugins::adafactor {

// Per-tensor settings of one step, from the options and the step count.
struct AdafactorStepConfig {
  float eps1;                       // eps[0], added to g*g
  float beta2t, one_minus_beta2t;   // 1 - t^decay_rate, rounded to fp32 as ATen rounds Python scalars
  double relative_step_size;        // rho
  bool scale_parameter;
  double eps2;                      // eps[1], the smallest parameter scale
  double lr_multiplier;             // relative_step: group lr (1.0 x lr_scale x schedule); else 1
  double clip_threshold;
  bool use_beta1;
  float beta1, one_minus_beta1;
  double weight_decay;
};

struct AdafactorTensor {
  void* param;          // dtype: float, bfloat16 or half
  const void* grad;     // same dtype as param
  c10::ScalarType dtype;
  int64_t numel;
  bool factored;        // dim >= 2
  int64_t matrices;     // B (factored)
  int64_t rows;         // M (factored)
  int64_t cols;         // N (factored)
  float* exp_avg_sq_row;  // [B, M] (factored)
  float* exp_avg_sq_col;  // [B, N] (factored)
  float* exp_avg_sq;      // [numel] (unfactored)
  float* exp_avg;         // [numel] or null without beta1
  AdafactorStepConfig config;
};

// Updates every tensor in the fused, parallel passes above.
void fused_adafactor_step(const std::vector<AdafactorTensor>& tensors);

// ---- the per-ISA element loops (adafactor_kernel_impl.h) ----

// One chunk: rows [begin, end) of the flattened [B*M, N] view (factored), or
// elements [begin, end) (unfactored).
struct ChunkStats {
  double sum_p2 = 0.0;   // sum of p^2 over the chunk
  double sum_u2 = 0.0;   // sum of u^2 (unfactored only, in pass 1)
  double* col_sums = nullptr;  // [matrices spanned by the chunk, N], zeroed (factored only)
};

// What pass 4 (and pass 3) needs beyond the tensor: the rsqrt factors and scalars.
struct ApplyScalars {
  const float* row_factor;  // [B*M] (factored)
  const float* col_factor;  // [B*N] (factored)
  float clip_divisor;       // max(1, RMS(u) / clip_threshold)
  float lr;
  float decay_alpha;        // -weight_decay * lr
};

struct ChunkKernels {
  // Pass 1, factored: adds p^2 into stats.sum_p2 and G's column sums into
  // stats.col_sums; writes the row means of G to row_means[begin..end).
  void (*factored_stats)(const AdafactorTensor& t, int64_t begin, int64_t end, ChunkStats& stats, float* row_means);
  // Pass 3, factored: the sum of u^2.
  double (*factored_update_sq)(const AdafactorTensor& t, int64_t begin, int64_t end, const ApplyScalars& s);
  void (*factored_apply)(const AdafactorTensor& t, int64_t begin, int64_t end, const ApplyScalars& s);
  // Pass 1, unfactored: updates V, adds p^2 and u^2.
  void (*unfactored_stats)(const AdafactorTensor& t, int64_t begin, int64_t end, ChunkStats& stats);
  void (*unfactored_apply)(const AdafactorTensor& t, int64_t begin, int64_t end, const ApplyScalars& s);
};

// One set per parameter dtype.
struct IsaKernels {
  ChunkKernels f32, bf16, f16;
};
IsaKernels generic_kernels();
IsaKernels avx2_kernels();
IsaKernels avx512_kernels();

}  // namespace ftcore::plugins::adafactor

// The GPTQ solve for one Linear: given W [out, in] and the Hessian of its
// layer-wise loss H = 2 X^T X / n (X the calibration inputs [n, in]), find
// integer codes that keep ||X W^T - X Q^T|| small, one input column at a
// time, pushing each column's rounding error onto the not-yet-quantized
// columns through the Cholesky factor of H^-1.
//
// Frantar et al., "GPTQ: Accurate Post-Training Quantization for Generative
// Pre-trained Transformers", 2022, https://arxiv.org/abs/2210.17323
// (Algorithm 1), with AutoGPTQ's choices, which its checkpoints encode:
//   dead columns (H_ii = 0): H_ii <- 1, W[:, i] <- 0
//   act-order (desc_act): columns in order of descending H_ii (stable sort)
//   damping: H += damp_percent * mean(diag H) * I
//   U = upper Cholesky factor of (H)^-1
//   per block of block_size columns, per column i:
//     q_i   = clamp(round(w_i / s) + z, 0, maxq)          round half to even
//     err_i = (w_i - s (q_i - z)) / U_ii
//     w_j  -= err_i * U_ij for the block's later columns j  (intra-block)
//   then W[:, later blocks] -= Err_block @ U[block, later blocks]  (lazy batch)
//   group parameters (min-max per output row over the group's columns) are
//     taken from W as it stands when the group's block starts: AutoGPTQ
//     reads them from W, which holds earlier blocks' updates but not the
//     current block's intra-block ones (they live in its W1 copy). With
//     group_size -1, one group from the weight as given.
//   min-max quantizer: xmin = min(0, min w), xmax = max(0, max w);
//     sym: xmax = max(|xmin|, xmax), xmin = -xmax if xmin < 0, z = (maxq+1)/2
//     asym: z = round(-xmin / s);  s = (xmax - xmin) / maxq; all-zero: [-1, 1]
// Rows are independent (groups and errors are per output row), so the
// column loop runs in parallel over rows; the lazy update is one GEMM.
// Everything here is float64; H arrives as the fp32 running average.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace ftcore::plugins::gptq {

struct GptqConfig {
  int bits = 4;
  int64_t group_size = 128;  // -1: one group per output row
  double damp_percent = 0.01;
  bool desc_act = false;
  bool sym = true;
  int64_t block_size = 128;
};

struct GptqResult {
  at::Tensor codes;   // int32 [out, in], original column order
  at::Tensor scales;  // float64 [groups, out]
  at::Tensor zeros;   // int32 [groups, out]
  at::Tensor g_idx;   // int32 [in]
};

// `path` names the layer in errors. `hessian` is consumed (modified in place).
GptqResult solve_gptq(const at::Tensor& weight, at::Tensor hessian, const GptqConfig& config, const std::string& path);

}  // namespace ftcore::plugins::gptq

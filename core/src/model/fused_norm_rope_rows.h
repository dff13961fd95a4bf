// The row loops of fused_norm_rope_kernel.h on tensors: when they apply, and
// forward and gradient calls through this CPU's ISA variant. Internal to
// fused_norm_rope.cpp (the public functions and the process check) and
// fused_norm_rope_nodes.cpp (the autograd nodes).
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

#include "ftcore/model_config.h"
#include "fused_norm_rope_kernel.h"

namespace ftcore::model {

// fp32 or bf16, as the loops read them; false for another dtype.
bool row_dtype(const at::Tensor& t, RowDtype& out);

// The RMSNorm loops apply: CPU, contiguous rows of fp32 or bf16 with a gain of
// the same dtype, and rows at::sum reduces whole with its vectorised inner
// loop (at least 8 elements; a single row under ATen's 32768-element grain).
bool rms_norm_rows_apply(const at::Tensor& x, const at::Tensor& weight, RowDtype& dtype);
at::Tensor rms_norm_rows(const at::Tensor& x, const at::Tensor& weight, double eps, RmsNormStyle style,
                         RowDtype dtype);
// The gradient of x from the contiguous gradient of rms_norm_rows' result
// (llama gain order, gain without gradient): one tensor, or for fp32 x its
// two parts {through h * r, through h.pow(2)} (RmsNormGradRows).
std::vector<at::Tensor> rms_norm_grad_rows(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad,
                                           double eps, RowDtype dtype, bool parts);

// The RoPE loops apply: CPU, x [B, heads, T, D] and cos/sin [B or 1, 1, T, D]
// (whole heads rotated) with unit last strides, fp32 or bf16, cos and sin alike.
bool rotary_rows_apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RowDtype& x_dtype,
                       RowDtype& trig_dtype);
// The result over x when may_overwrite_x and only the caller holds x (the
// projection's fresh output, no graph); else in x's layout.
at::Tensor rotary_rows(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RowDtype x_dtype,
                       RowDtype trig_dtype, bool may_overwrite_x);
// The gradient of x, laid out as `x_layout` (a meta tensor), from the
// gradient of rotary_rows' result.
at::Tensor rotary_grad_rows(const at::Tensor& grad, const at::Tensor& cos, const at::Tensor& sin,
                            const at::Tensor& x_layout);

}  // namespace ftcore::model

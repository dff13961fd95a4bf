// RMSNorm and RoPE where autograd records a graph through the activations
// only (a LoRA run: frozen norms, RoPE's angles from positions), as autograd
// nodes: the row loops forward (fused_norm_rope_rows.h), and backward one
// pass per row that replays autograd's backward formulas through the op
// chains, so the gradients are the chains' bits. fused_norm_rope.h's
// rms_norm and rotary call these when they apply.
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// The llama gain order; x of fp32 or bf16 that rms_norm_rows_apply accepts,
// x requiring grad, the gain not.
at::Tensor rms_norm_recording_x(const at::Tensor& x, const at::Tensor& weight, double eps);

// x requiring grad, cos and sin not, as rotary_rows_apply accepts.
at::Tensor rotary_recording_x(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace ftcore::model

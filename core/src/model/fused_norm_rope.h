// RMSNorm and RoPE as one pass over each row where no autograd graph is
// recorded: evaluation, generation, a checkpointed layer's first forward,
// and layers no trainable tensor feeds. ATen runs them as chains of 9 and 6
// ops over [tokens, hidden] tensors (on the default model's bf16 forward,
// 26% of the time; docs/benchmarks.md). The row loops
// (fused_norm_rope_kernel.h) replay each op's rounding in its order, so the
// results are the chains' bits; a once-per-process check against the chains
// on the running libtorch keeps the chains if any bit differs. Where a graph
// is recorded through the activations only, RoPE and the llama RMSNorm are
// autograd nodes whose backward is one pass that gives autograd's gradient
// through the chain, bit for bit (fused_norm_rope_nodes.h); elsewhere the
// chains run, and autograd differentiates them as before.
#pragma once

#include <ATen/core/Tensor.h>

#include "ftcore/model_config.h"

namespace ftcore::model {

// x.to(f32); h * rsqrt(h.pow(2).mean(-1) + eps); the gain as `style` applies it; back to x's dtype.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, RmsNormStyle style);
// The same as ATen's op chain (what autograd records).
at::Tensor rms_norm_aten_chain(const at::Tensor& x, const at::Tensor& weight, double eps, RmsNormStyle style);

// RoPE on the first R = cos.size(-1) dims of each head, the rest passed
// through (partial rotary): x * cos + rotate_half(x) * sin, rotate_half
// (x1, x2) -> (-x2, x1); x [B, heads, T, D], cos/sin [B or 1, 1, T, R].
// x is taken as consumed: without a graph, an x no one else holds is
// overwritten with the result (reusable_in_place.h).
at::Tensor rotary(at::Tensor&& x, const at::Tensor& cos, const at::Tensor& sin);
// The same as ATen's op chain.
at::Tensor rotary_aten_chain(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// Whether this process's row loops gave the chains' bits on the check's inputs (computed once).
bool fused_norm_rope_match_aten();

}  // namespace ftcore::model

// LoRA's dropout with torch's draws and a one-byte mask in the graph.
//
// On the CPU at::dropout(x, p, train) draws noise = bernoulli(1 - p) in x's
// dtype, divides it by (1 - p) and returns x * noise; autograd then keeps
// `noise` for backward: 4 bytes per element of every adapted slot's input
// [B, T, in] in fp32 (PEFT's dropout costs the same). Here the same calls
// draw the same noise and form the same product, and backward keeps only
// noise != 0 (1 byte per element) and noise's one nonzero value s:
// grad * where(mask, s, 0) multiplies each element by exactly what noise
// held, so gradients are bit-identical and the mask takes a quarter of the
// memory (issue #14: about 200 MB of a bf16 LoRA step on the default model).
// fp32 inputs on the CPU draw in one pass (dropout_draws.h), the same draws.
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::plugins::lora {

// dropout(x, p) in training: x * noise as at::dropout computes it, same RNG use.
at::Tensor dropout_with_byte_mask(const at::Tensor& x, double p);

}  // namespace ftcore::plugins::lora

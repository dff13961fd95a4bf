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
//
// lora_A(dropout(x)) goes further where it can: at::linear keeps its input
// for A's gradient, so each adapted slot kept its own fp32 dropout(x), 4
// bytes per element of [B, T, in] (q, k and v each one of the same x; 23%
// of an fp32 LoRA step's saved tensors on the default model, stop 31). Its
// node keeps x (shared by the slots, or already kept by attention) and the
// byte mask, and forms dropout(x) again in backward: x * where(mask, s, 0),
// the same product, so the gradients are the same bits.
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::plugins::lora {

// dropout(x, p) in training: x * noise as at::dropout computes it, same RNG use.
at::Tensor dropout_with_byte_mask(const at::Tensor& x, double p);

// at::linear(dropout_with_byte_mask(x, p), lora_a) in training: the same
// draws, values and gradients. Keeps x and the mask instead of the product
// for an fp32 CPU x (contiguous, drawn in one pass) outside autocast, with
// a graph to record; elsewhere it is that composition as written.
at::Tensor dropout_then_down_projection(const at::Tensor& x, double p, const at::Tensor& lora_a);

}  // namespace ftcore::plugins::lora

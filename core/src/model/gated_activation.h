// The gated MLP's middle, act(gate) * up (SwiGLU: act = SiLU; GeGLU: GELU,
// tanh approximation), as one autograd node that keeps gate and up only.
//
// Left to autograd, the two ops keep three [B, T, F] tensors for backward:
// gate (for act's derivative), act(gate) and up (for the product's). Here
// act(gate) is recomputed in backward, one elementwise pass, and the
// gradients are formed with the ops autograd itself uses (mul, then
// at::silu_backward / at::gelu_backward), so they are bit-identical; one
// [B, T, F] tensor per layer less is kept (issue #14: about 3 MB per layer
// of a bf16 LoRA step on the default model).
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// act(gate) * up; `gelu_tanh` picks GELU (tanh) over SiLU. gate is taken as
// consumed: without a graph, a gate no one else holds is overwritten with
// the result (reusable_in_place.h).
at::Tensor gated_activation(at::Tensor&& gate, const at::Tensor& up, bool gelu_tanh);

}  // namespace ftcore::model

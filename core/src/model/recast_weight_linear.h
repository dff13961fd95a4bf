// A Linear over a trainable fp32 weight under CPU autocast (a full fine-tune
// in bf16) whose backward casts the weight to the compute dtype again instead
// of keeping the cast from the forward.
//
// Autocast caches the low-precision copy of every trainable weight for the
// whole forward, and autograd keeps it until that Linear's backward: on the
// default model 212 MB of bf16 weights are live at the start of backward,
// which is a full fine-tune's peak (issue #14 item 4). Here the cast is made
// in the forward, used and dropped; backward makes it again (one elementwise
// pass over the weight per Linear and step) from the fp32 parameter, which is
// live anyway. The GEMMs are the ones autograd runs for autocast's at::linear
// (the folded [rows, in] x weight^T, then MmBackward0's grad x weight and
// grad^T x input, ToCopyBackward0's casts back), so values and gradients are
// bit-identical to it (recast_weight_linear_test).
//
// Without autocast (an fp32 run) the same node serves a tied lm_head alone,
// in fp32 with no casts, for its backward's offer: the embedding's backward
// then adds its rows into the lm_head's weight gradient in place
// (tied_embedding_gradient.h) where autograd would add two dense
// [vocab, hidden] gradients: on the default model that add took 192 ms of a
// 1,440 ms full fp32 step (docs/benchmarks.md, stop 28). Its GEMMs are
// at::linear's in fp32 too: same values, same gradients.
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// Whether linear_recasting_weight applies: a graph is recorded, CPU autocast
// is on (or, without it, the weight is tied to the embedding and x is fp32),
// the weight is a trainable contiguous fp32 leaf, there is no bias, and x is
// a contiguous float (not double) tensor of 2 or more dimensions (the shapes
// whose at::linear folds into one mm). Elsewhere at::linear is used as it is.
bool recasting_weight_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              bool tied_to_embedding = false);

// at::linear(x, weight) as autocast runs it ([..., in] x [out, in] ->
// [..., out] in the autocast dtype), or in fp32 when autocast is off.
// `tied_to_embedding`: the weight is also the embedding's (a tied lm_head),
// whose backward then sums its rows into this gradient (tied_embedding_gradient.h).
at::Tensor linear_recasting_weight(const at::Tensor& x, const at::Tensor& weight, bool tied_to_embedding = false);

}  // namespace ftcore::model

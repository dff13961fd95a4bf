// The summed cross-entropy of fp32 logits as one autograd node that works in
// the logits' own storage.
//
// at::cross_entropy_loss keeps log_softmax's output [N, V] for backward, and
// its backward makes two more [N, V] tensors (nll_loss's gradient, then
// log_softmax's): with the default model's 49,152-token vocabulary and ~400
// target rows that is 3 x 80 MB at the start of backward, when every layer's
// activations are still held, which is where a training step peaks (issue
// #14). Here log_softmax is written over the logits in place, row block by
// row block, kept as the node's only saved tensor, and backward overwrites it
// with the gradient, again block by block (only nll_loss's [block, V]
// gradient is allocated). Each block goes through the very ops
// at::cross_entropy_loss and its backward run (log_softmax, nll_loss,
// nll_loss_backward, _log_softmax_backward_data; all work row by row), so
// the loss and the gradient are bit-identical; one [N, V] tensor is held
// instead of up to three.
//
// The node consumes its input: after the call the logits tensor holds
// log-probabilities, and the caller must not read it. Backward runs once
// (a second one, with retain_graph, is refused: the buffer holds gradients).
// Shapes: N target rows, V vocabulary.
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::train {

// sum_i -log_softmax(logits[i])[targets[i]]; logits fp32 [N, V], contiguous,
// on the CPU, not a leaf, consumed; targets int64 [N], none ignored.
at::Tensor consuming_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& targets);

}  // namespace ftcore::train

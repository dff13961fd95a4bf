// The gradient of a weight tied between the embedding and the lm_head
// (tie_word_embeddings), summed without a dense [vocab, hidden] temporary.
//
// Autograd sums a tied weight's two gradients in the weight's input buffer:
// the lm_head's dense G1 arrives at the start of backward; at the very end
// the embedding's backward (embedding_dense_backward) fills a zero
// [vocab, hidden] tensor G2 with each position's row and the buffer adds it
// to G1. On the default model that is a 113 MB fp32 transient at the moment
// every other gradient is already live: a full fine-tune's peak (issue #14
// item 4). Here the lm_head's backward (recast_weight_linear.h) offers G1,
// and the embedding's backward adds the rows of the tokens it saw into G1
// itself and hands autograd no second gradient. Same bits as autograd's sum:
//   rows present:  G1[k] + G2[k], G2's rows summed by embedding_dense_backward
//                  itself over the compacted ids (the same order per row);
//   other rows:    G1[k] + 0, which turns a -0 into +0 as the dense add does.
// The offer is tagged with the backward (graph task) that made it and held
// weakly: an embedding backward of another pass, or one whose G1 autograd no
// longer holds, takes the ordinary dense path.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// The embedding lookup at::embedding(weight, ids) ([B, T] -> [B, T, C]) as
// an autograd node whose backward sums into an offered lm_head gradient of
// the same weight; with no offer its gradient is at::embedding's.
at::Tensor embedding_summing_into_tied_head(const at::Tensor& weight, const at::Tensor& ids);

// Called by a tied lm_head's backward with its fp32 weight gradient: the
// gradient the embedding's backward in this same pass may add into.
void offer_tied_head_gradient(const at::Tensor& weight, const at::Tensor& head_gradient);

// How many embedding backwards of this process summed into an offered lm_head
// gradient; for tests, which check the path ran, not only its fallback.
int64_t tied_gradient_sums_taken();

// head_gradient += at::embedding_dense_backward(grad, ids, vocab) in place,
// bit for bit, without the dense [vocab, hidden] second operand (exposed for
// tied_embedding_gradient_test). ids: int64 or int32, no padding index.
void add_embedding_gradient_into(at::Tensor& head_gradient, const at::Tensor& grad, const at::Tensor& ids);

}  // namespace ftcore::model

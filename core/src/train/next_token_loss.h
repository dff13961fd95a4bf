// The causal LM loss, summed (not averaged) so the trainer can normalise by
// the target tokens of the whole accumulated batch, as transformers does
// with num_items_in_batch: micro-batches 8 x 1 and 1 x 8 then give the same
// update on variable-length data.
//
//   loss_sum = sum over (b, t) with labels[b, t+1] != -100 of
//              -log softmax(lm_head(hidden[b, t]))[labels[b, t+1]]
//
// Only positions that have a target go through lm_head (the vocabulary
// projection is the largest matmul of a small model, and prompt tokens are
// masked out), which is the same sum as shifting full logits. The
// cross-entropy runs in fp32 whatever the compute precision.
#pragma once

#include <ATen/core/Tensor.h>

#include "ftcore/collate.h"
#include "ftcore/model.h"

namespace ftcore::train {

// Scalar fp32 tensor: the summed loss of `batch` (0 with a graph when it has no targets).
// With `router_aux_loss` given, a mixture-of-experts model whose config asks
// for it (output_router_logits) also returns there its load-balancing loss
// over the batch's tokens, padding left out (model_moe.h); otherwise the
// tensor is left undefined.
at::Tensor summed_next_token_loss(Model& model, const TrainBatch& batch, at::Tensor* router_aux_loss = nullptr);

}  // namespace ftcore::train

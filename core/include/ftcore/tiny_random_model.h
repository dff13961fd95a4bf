// A tiny random Llama built in memory, for checks that need a real model but
// no files: `ftcore plugin verify` for adapters and the adapter conformance
// tests run the SDK's checks (sdk/testing.h) on it.
//
// 2 layers, hidden 32, 4 query / 2 key-value heads, vocabulary 64, attention
// biases: every Linear slot kind an adapter meets in the plain layout.
// Weights ~ N(0, 0.1), norms ~ 1 + N(0, 0.1), from a private generator, so
// two calls give equal models and the global generator is untouched.
#pragma once

#include <memory>

#include <ATen/core/Tensor.h>

#include "ftcore/model.h"

namespace ftcore {

std::shared_ptr<Model> tiny_random_llama(bool tied_embeddings);

// Logits [2, 7, 64] of two rows of seven fixed tokens, in eval mode (dropout
// off): the `logits_of` the conformance checks take.
at::Tensor tiny_random_llama_logits(sdk::ModelView& view);

}  // namespace ftcore

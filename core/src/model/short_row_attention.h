// Attention of short rows while a graph is recorded under bf16/fp16 autocast
// (llama_layers.cpp says why these rows leave SDPA for its fp32 math path),
// as one autograd node that keeps its inputs and the softmax weights.
//
// Left to autograd, the math path keeps for backward the scaled queries, the
// keys and values with their heads repeated (all fp32) and the [B, H, T, S]
// softmax weights: about 26 bytes per token and hidden unit at the default
// model's 55 keys a row, the largest share of a bf16 LoRA step's activations
// (docs/benchmarks.md). This node keeps q and k, v before the repetition
// (6 bytes: q and k in fp32, v in bf16) and the weights (4 H S bytes a token,
// 3.4 bytes per hidden unit at 55 keys). Its backward rebuilds the repeated
// fp32 inputs and the scalings (copies and one multiply each, the ops the
// forward ran) and runs autograd's backward of the math path op for op on
// the same layouts, so the gradients are those of the recorded graph bit for
// bit, without a second forward of the matmuls and the softmax.
// Shapes: B batch, H query heads, G key/value heads, T queries, S keys, D head size.
#pragma once

#include <optional>

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// Which pass of gradient checkpointing (llama_checkpoint.cpp) this thread
// runs. The first forward runs without a graph and the recomputation in
// backward with one: attention must take the same path in both (and in a
// plain training forward), or the gradients belong to other activations;
// and inside the recomputation, whose graph lives for one layer, attention
// lets autograd record its ops rather than keep inputs to recompute again.
enum class CheckpointPass { none, first_forward, recomputation };

class CheckpointPassScope {
 public:
  explicit CheckpointPassScope(CheckpointPass pass);
  ~CheckpointPassScope();
  CheckpointPassScope(const CheckpointPassScope&) = delete;
  CheckpointPassScope& operator=(const CheckpointPassScope&) = delete;
  static CheckpointPass current();

 private:
  CheckpointPass previous_;
};

// [B, G, S, D] -> [B, G * groups, S, D], each key/value head serving `groups` query heads.
at::Tensor repeat_kv(const at::Tensor& x, int64_t groups);

// softmax(q k^T * scale + additive_mask) v in fp32 with autocast off (libtorch's
// math path), over k and v [B, G, S, D] repeated to the H = G * groups query
// heads; q [B, H, T, D]. Returns fp32 [B, H, T, D].
at::Tensor short_row_math_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const std::optional<at::Tensor>& additive_mask, int64_t groups, bool is_causal,
                                    double scale);

}  // namespace ftcore::model

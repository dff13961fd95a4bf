// The key/value cache of generation: per layer, the rotated keys and the
// values of every position seen so far, so each new token costs one
// attention row instead of a full recompute. Also the sequence id of each
// cached position (-1 for padding) so padded rows stay masked while decoding.
//
// Shapes: B rows, G key/value heads, S cached positions, D head size.
// Buffers grow by doubling; layers write in place (inference only).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ftcore {

class KVCache {
 public:
  int64_t length() const { return length_; }  // S
  int64_t batch_size() const { return batch_; }
  bool empty() const { return length_ == 0; }
  void clear();

  // Sequence ids of the cached positions [B, S] (undefined when empty).
  at::Tensor sequence_ids() const;

  // --- used by the model during one forward call ---
  // Makes room for T more positions in every layer.
  void reserve(int64_t num_layers, int64_t batch, int64_t new_tokens, int64_t kv_heads, int64_t head_dim,
               const at::TensorOptions& options);
  // Writes this call's keys/values [B, G, T, D] after the cached ones and
  // returns views of all of them [B, G, S + T, D].
  std::pair<at::Tensor, at::Tensor> write(int64_t layer, const at::Tensor& keys, const at::Tensor& values);
  // After every layer wrote: the T new positions become part of the cache.
  void commit(const at::Tensor& new_sequence_ids);

 private:
  std::vector<at::Tensor> keys_, values_;  // [B, G, capacity, D]
  at::Tensor sequence_ids_;                // [B, capacity] int64
  int64_t length_ = 0, capacity_ = 0, batch_ = 0, pending_ = 0;
};

}  // namespace ftcore

// The KV cache's buffers (model_cache.h): one [B, G, capacity, D] key and
// value buffer per layer, grown by doubling so a generation of N tokens
// copies O(N) elements, not O(N^2) as re-concatenating every step would.
// Shapes: B rows, G key/value heads, D head size.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "ftcore/model_cache.h"

namespace ftcore {

void KVCache::clear() {
  keys_.clear();
  values_.clear();
  sequence_ids_ = at::Tensor();
  length_ = capacity_ = batch_ = pending_ = 0;
}

at::Tensor KVCache::sequence_ids() const {
  return length_ > 0 ? sequence_ids_.narrow(1, 0, length_) : at::Tensor();
}

void KVCache::reserve(int64_t num_layers, int64_t batch, int64_t new_tokens, int64_t kv_heads, int64_t head_dim,
                      const at::TensorOptions& options) {
  TORCH_CHECK(!c10::GradMode::is_enabled(),
              "the KV cache is for inference: run the forward under at::NoGradGuard (or InferenceMode)");
  if (keys_.empty()) {
    batch_ = batch;
  } else {
    TORCH_CHECK(batch == batch_, "the KV cache holds ", batch_, " rows, this forward has ", batch,
                "; clear() it before a new batch");
    TORCH_CHECK(static_cast<int64_t>(keys_.size()) == num_layers && keys_[0].size(1) == kv_heads &&
                    keys_[0].size(3) == head_dim && keys_[0].scalar_type() == options.dtype().toScalarType() &&
                    keys_[0].device() == options.device(),
                "the KV cache was filled by a different model (layers, heads, dtype or device)");
  }
  const int64_t needed = length_ + new_tokens;
  if (needed > capacity_) {
    const int64_t capacity = std::max<int64_t>({needed, 2 * capacity_, 16});
    keys_.resize(num_layers);
    values_.resize(num_layers);
    for (int64_t l = 0; l < num_layers; ++l) {
      for (at::Tensor* buffer : {&keys_[l], &values_[l]}) {
        at::Tensor grown = at::empty({batch, kv_heads, capacity, head_dim}, options);
        if (length_ > 0) grown.narrow(2, 0, length_).copy_(buffer->narrow(2, 0, length_));
        *buffer = grown;
      }
    }
    at::Tensor ids = at::full({batch, capacity}, -1, options.dtype(at::kLong));
    if (length_ > 0) ids.narrow(1, 0, length_).copy_(sequence_ids_.narrow(1, 0, length_));
    sequence_ids_ = ids;
    capacity_ = capacity;
  }
  pending_ = new_tokens;
}

std::pair<at::Tensor, at::Tensor> KVCache::write(int64_t layer, const at::Tensor& keys, const at::Tensor& values) {
  TORCH_CHECK(layer >= 0 && layer < static_cast<int64_t>(keys_.size()) && keys.size(2) == pending_,
              "KVCache::write without a matching reserve()");
  keys_[layer].narrow(2, length_, pending_).copy_(keys);
  values_[layer].narrow(2, length_, pending_).copy_(values);
  return {keys_[layer].narrow(2, 0, length_ + pending_), values_[layer].narrow(2, 0, length_ + pending_)};
}

void KVCache::commit(const at::Tensor& new_sequence_ids) {
  TORCH_CHECK(new_sequence_ids.size(1) == pending_, "KVCache::commit of ", new_sequence_ids.size(1),
              " positions after a reserve() of ", pending_);
  sequence_ids_.narrow(1, length_, pending_).copy_(new_sequence_ids);
  length_ += pending_;
  pending_ = 0;
}

}  // namespace ftcore

// Who attends to whom: sequence ids from padding masks or packed rows,
// default positions that restart at each sequence, and the boolean attention
// masks handed to scaled_dot_product_attention (model_layers.h).
//
// Every token carries a sequence id: >= 0 for a token of that sequence,
// -1 for padding. Query i of this call has the absolute index past + i in its
// row; it may attend key j iff
//   j <= past + i                  (causal)
//   id[j] == id[i] and id[i] >= 0  (same sequence, never padding)
//   past + i - j < W               (sliding window W, when the layer has one)
// and every query may attend itself, so a padding row's softmax is never
// empty (an all -inf row gives NaN, and NaN * 0 poisons the gradients).
// Shapes: B rows, T new tokens, P cached tokens, S = P + T keys.
#include <unordered_map>

#include <ATen/ATen.h>

#include "ftcore/model_layers.h"

namespace ftcore::model {

namespace {

void check_row_shape(const at::Tensor& t, const at::Tensor& input_ids, const char* what) {
  TORCH_CHECK(t.dim() == 2 && t.sizes() == input_ids.sizes(), what, " must be [B, T] like input_ids ",
              input_ids.sizes(), ", got ", t.sizes());
}

bool all_zero(const at::Tensor& t) { return !t.defined() || !t.ne(0).any().item<bool>(); }

}  // namespace

at::Tensor resolve_sequence_ids(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                const at::Tensor& sequence_ids) {
  if (attention_mask.defined() && !sequence_ids.defined()) {
    check_row_shape(attention_mask, input_ids, "attention_mask");
    return at::where(attention_mask.ne(0), 0, -1).to(at::kLong).to(input_ids.device());
  }
  if (sequence_ids.defined()) {
    check_row_shape(sequence_ids, input_ids, "sequence_ids");
    TORCH_CHECK(!at::isFloatingType(sequence_ids.scalar_type()), "sequence_ids must be integers, got ",
                sequence_ids.scalar_type());
    TORCH_CHECK(sequence_ids.numel() == 0 || sequence_ids.min().item<int64_t>() >= -1,
                "sequence_ids must be >= 0 for tokens and -1 for padding");
    at::Tensor ids = sequence_ids.to(at::kLong).to(input_ids.device());
    if (attention_mask.defined()) {  // both (as the collator gives them): they must agree on padding
      check_row_shape(attention_mask, input_ids, "attention_mask");
      TORCH_CHECK(at::equal(attention_mask.to(ids.device()).ne(0), ids.ge(0)),
                  "attention_mask and sequence_ids disagree on which tokens are padding (mask 0 <=> id -1)");
    }
    return ids;
  }
  return at::zeros(input_ids.sizes(), input_ids.options().dtype(at::kLong));
}

at::Tensor default_positions(const at::Tensor& sequence_ids, const at::Tensor& past_sequence_ids) {
  const int64_t batch = sequence_ids.size(0), tokens = sequence_ids.size(1);
  const int64_t cached = past_sequence_ids.defined() ? past_sequence_ids.size(1) : 0;
  if (all_zero(sequence_ids) && all_zero(past_sequence_ids))  // one unpadded sequence per row
    return at::arange(cached, cached + tokens, sequence_ids.options()).unsqueeze(0).expand({batch, tokens}).contiguous();
  // Counting per id is a scan over ids of any order; a short host loop is
  // simpler than a device kernel and runs once per forward.
  at::Tensor ids = past_sequence_ids.defined() ? at::cat({past_sequence_ids, sequence_ids}, 1) : sequence_ids;
  ids = ids.to(at::kCPU).contiguous();
  const int64_t past = ids.size(1) - tokens;
  at::Tensor positions = at::zeros({batch, tokens}, at::kLong);
  auto in = ids.accessor<int64_t, 2>();
  auto out = positions.accessor<int64_t, 2>();
  for (int64_t b = 0; b < batch; ++b) {
    std::unordered_map<int64_t, int64_t> seen;
    for (int64_t j = 0; j < ids.size(1); ++j) {
      const int64_t id = in[b][j];
      if (id < 0) continue;  // padding keeps position 0
      int64_t& count = seen[id];
      if (j >= past) out[b][j - past] = count;
      ++count;
    }
  }
  return positions.to(sequence_ids.device());
}

AttentionMask build_attention_mask(const at::Tensor& sequence_ids, const at::Tensor& past_sequence_ids,
                                   int64_t window) {
  const int64_t tokens = sequence_ids.size(1);
  const int64_t past = past_sequence_ids.defined() ? past_sequence_ids.size(1) : 0;
  const int64_t keys = past + tokens;
  const bool plain = all_zero(sequence_ids) && all_zero(past_sequence_ids);
  // Fast paths the fused kernels like: a plain causal block, or one new token seeing everything cached.
  if (plain && past == 0 && (window == 0 || tokens <= window)) return {at::Tensor(), true};
  if (plain && tokens == 1 && (window == 0 || keys <= window)) return {at::Tensor(), false};

  const auto index_options = sequence_ids.options().dtype(at::kLong);
  at::Tensor key_ids = past > 0 ? at::cat({past_sequence_ids, sequence_ids}, 1) : sequence_ids;  // [B, S]
  at::Tensor q_index = at::arange(past, keys, index_options).unsqueeze(1);                         // [T, 1]
  at::Tensor k_index = at::arange(keys, index_options).unsqueeze(0);                               // [1, S]
  at::Tensor allowed = k_index.le(q_index);                                                         // [T, S]
  if (window > 0) allowed = allowed.logical_and((q_index - k_index).lt(window));
  at::Tensor same = sequence_ids.unsqueeze(2).eq(key_ids.unsqueeze(1))
                        .logical_and_(sequence_ids.ge(0).unsqueeze(2));                            // [B, T, S]
  allowed = same.logical_and_(allowed.unsqueeze(0)).logical_or_(k_index.eq(q_index).unsqueeze(0));
  return {allowed.unsqueeze(1), false};  // [B, 1, T, S]
}

}  // namespace ftcore::model

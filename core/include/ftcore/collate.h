// Collation: rows of examples -> the tensors a forward pass takes. A row
// holds one example, or several packed ones (from a packing sampler):
//   input_ids     [B, T] int64, pad_id at padding
//   labels        [B, T] int64, kIgnoreLabel at padding, masked prompt tokens,
//                 and the first token of each packed sequence after the
//                 first (it must not be predicted from the previous sequence)
//   position_ids  [B, T] int64, restarting at 0 for each packed sequence
//   sequence_ids  [B, T] int32, the packed sequence a token belongs to
//                 (0, 1, ...), -1 at padding: attention stays within a sequence
//   attention_mask [B, T] int64, 1 for real tokens
// T is the longest row, or sequence_len with pad_to_sequence_len; padding
// goes right or left.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ftcore/dataset.h"

namespace ftcore {

struct CollateOptions {
  int64_t sequence_len = 2048;
  bool pad_to_sequence_len = false;
  bool pad_left = false;
  int32_t pad_id = 0;
};

struct TrainBatch {
  at::Tensor input_ids, labels, position_ids, sequence_ids, attention_mask;
  int64_t tokens = 0;          // real (non-padding) tokens
  int64_t target_tokens = 0;   // labels the shifted loss uses: labels[:, 1:] != kIgnoreLabel
};

TrainBatch collate(const std::vector<std::vector<const Example*>>& rows, const CollateOptions& options);

}  // namespace ftcore

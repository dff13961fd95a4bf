// Rows of (packed) examples to padded tensors (see collate.h).
#include "ftcore/collate.h"

#include <ATen/ATen.h>

namespace ftcore {

TrainBatch collate(const std::vector<std::vector<const Example*>>& rows, const CollateOptions& options) {
  const int64_t B = static_cast<int64_t>(rows.size());
  std::vector<int64_t> lengths;
  int64_t T = 0;
  for (const auto& row : rows) {
    int64_t n = 0;
    for (const Example* e : row) n += static_cast<int64_t>(e->input_ids.size());
    TORCH_CHECK(n <= options.sequence_len, "a collated row holds ", n, " tokens, more than sequence_len ",
                options.sequence_len);
    lengths.push_back(n);
    T = std::max(T, n);
  }
  if (options.pad_to_sequence_len) T = options.sequence_len;
  TrainBatch batch;
  batch.input_ids = at::full({B, T}, options.pad_id, at::kLong);
  batch.labels = at::full({B, T}, kIgnoreLabel, at::kLong);
  batch.position_ids = at::zeros({B, T}, at::kLong);
  batch.sequence_ids = at::full({B, T}, -1, at::kInt);
  batch.attention_mask = at::zeros({B, T}, at::kLong);
  auto ids = batch.input_ids.accessor<int64_t, 2>();
  auto labels = batch.labels.accessor<int64_t, 2>();
  auto positions = batch.position_ids.accessor<int64_t, 2>();
  auto sequences = batch.sequence_ids.accessor<int32_t, 2>();
  auto mask = batch.attention_mask.accessor<int64_t, 2>();
  for (int64_t b = 0; b < B; ++b) {
    int64_t t = options.pad_left ? T - lengths[b] : 0;
    int32_t sequence = 0;
    for (const Example* e : rows[b]) {
      for (size_t k = 0; k < e->input_ids.size(); ++k, ++t) {
        ids[b][t] = e->input_ids[k];
        // The first token of a later packed sequence is no target of the one before it.
        labels[b][t] = (k == 0 && sequence > 0) ? kIgnoreLabel : e->labels[k];
        positions[b][t] = static_cast<int64_t>(k);
        sequences[b][t] = sequence;
        mask[b][t] = 1;
      }
      ++sequence;
    }
    batch.tokens += lengths[b];
  }
  if (T > 1) batch.target_tokens = batch.labels.slice(1, 1).ne(kIgnoreLabel).sum().item<int64_t>();
  return batch;
}

}  // namespace ftcore

// Packing efficiency of what a packing sampler (sampler/multipack) yields:
// the fraction of the rows' token budget that example tokens fill,
//
//   efficiency = (sum over rows of the lengths of their examples)
//                / (number of rows x sequence_len)
//
// 1.0 is perfect packing; the remainder is padding the collator adds. It is
// measured over the batches given (one rank's, or every rank's together); a
// row that DistributedSampler-style padding repeats counts each time, since
// it is trained each time. 0 when there are no rows.
//
// Header-only and in the SDK, so that the trainer (for
// its logs), benchmarks and tests use it without depending on a plugin.
#pragma once

#include <cstdint>
#include <vector>

#include "ftcore/sdk/sampler.h"

namespace ftcore::sdk {

inline double packing_efficiency(const std::vector<Batch>& batches, const std::vector<int64_t>& lengths,
                                 int64_t sequence_len) {
  int64_t tokens = 0;
  int64_t rows = 0;
  for (const Batch& batch : batches) {
    for (const std::vector<int64_t>& row : batch.rows) {
      ++rows;
      for (int64_t example : row) tokens += lengths[static_cast<size_t>(example)];
    }
  }
  if (rows == 0 || sequence_len <= 0) return 0.0;
  return static_cast<double>(tokens) / (static_cast<double>(rows) * static_cast<double>(sequence_len));
}

}  // namespace ftcore::sdk

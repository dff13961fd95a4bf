// Text segments -> one Example: each segment tokenized on its own (so the
// mask follows segment boundaries exactly), the first with the tokenizer's
// special tokens (BOS where its post-processor adds one), labels copied from
// trainable segments and kIgnoreLabel elsewhere, EOS appended (a labelled
// target) unless a chat template already ended the last turn with it, then
// truncated to sequence_len.
#pragma once

#include <vector>

#include "ftcore/dataset.h"
#include "ftcore/tokenizer.h"

namespace ftcore::data {

struct TokenizeResult {
  Example example;
  bool truncated = false;
};

TokenizeResult tokenize_segments(const std::vector<ChatSegment>& segments, const Tokenizer& tokenizer,
                                 const DataConfig& config);

}  // namespace ftcore::data

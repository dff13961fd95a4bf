// Segments to token ids and labels (see tokenize_example.h).
#include "tokenize_example.h"

#include <algorithm>

namespace ftcore::data {

TokenizeResult tokenize_segments(const std::vector<ChatSegment>& segments, const Tokenizer& tokenizer,
                                 const DataConfig& config) {
  TokenizeResult result;
  Example& e = result.example;
  bool first = true;
  for (const auto& segment : segments) {
    std::vector<int32_t> ids = tokenizer.encode(segment.text, /*add_special_tokens=*/first);
    first = false;
    const bool labelled = segment.trainable || config.train_on_inputs;
    e.input_ids.insert(e.input_ids.end(), ids.begin(), ids.end());
    for (int32_t id : ids) e.labels.push_back(labelled ? id : kIgnoreLabel);
  }
  if (auto eos = tokenizer.eos_id()) {
    const bool ends_with_eos = !e.input_ids.empty() && e.input_ids.back() == *eos;
    const bool chat_closed_turn =
        config.format == "chat" && std::find(e.input_ids.begin(), e.input_ids.end(), *eos) != e.input_ids.end();
    if (!ends_with_eos && !chat_closed_turn) {
      e.input_ids.push_back(*eos);
      e.labels.push_back(*eos);
    }
  }
  if (static_cast<int64_t>(e.input_ids.size()) > config.sequence_len) {
    e.input_ids.resize(static_cast<size_t>(config.sequence_len));
    e.labels.resize(static_cast<size_t>(config.sequence_len));
    result.truncated = true;
  }
  return result;
}

}  // namespace ftcore::data

// Training data: rows from JSONL/JSON files in the formats `alpaca`,
// `completion`, `chat` (messages, or sharegpt-style conversations) and a
// custom `template`, rendered to text segments, tokenized, masked (labels of
// prompt tokens are -100 unless train_on_inputs), truncated to sequence_len,
// EOS appended, split into train/validation with a seed, and cached by a hash
// of the data file, the tokenizer and the format options.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ftcore/diagnostics.h"
#include "ftcore/sdk/params.h"
#include "ftcore/tokenizer.h"

namespace ftcore {

inline constexpr int32_t kIgnoreLabel = -100;  // HF's ignore_index

struct DataConfig {
  std::filesystem::path path;
  std::string format = "alpaca";   // alpaca | completion | chat | template
  std::string field = "text";      // completion's text field
  std::string prompt_template;     // template format: {instruction} and {input}
  bool train_on_inputs = false;
  int64_t sequence_len = 2048;
  double val_set_size = 0.0;
  std::string dataset_prepared_path;  // "" = no cache
  bool skip_bad_rows = false;
  std::string chat_template;       // name or text; "" = the tokenizer's
  bool enable_thinking = true;     // the chat template's thinking mode (qwen3, smollm3)
  uint64_t seed = 42;

  // From the recipe's [data] options (+ [model].chat_template and enable_thinking, [train].seed).
  static DataConfig from_options(const sdk::Options& data, const sdk::Options& model, const sdk::Options& train);
};

struct Example {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;  // same length; kIgnoreLabel where no loss is taken
  int64_t source_line = 0;      // 1-based line (JSONL) or row index + 1 (JSON)
  int64_t target_tokens() const;
};

struct PreparedData {
  std::vector<Example> train, validation;
  int64_t rows = 0, skipped_rows = 0, truncated = 0;
  int64_t without_targets = 0;  // examples left out: no target token within sequence_len
  std::string cache_key;  // hex SHA-256 of data file, tokenizer, options
  bool from_cache = false;
};

// A malformed row: names file:line and the field (thrown unless skip_bad_rows).
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

PreparedData prepare_data(const DataConfig& config, const Tokenizer& tokenizer,
                          const std::filesystem::path& tokenizer_file);

}  // namespace ftcore

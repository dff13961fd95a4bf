// Evaluation on the validation split: the token-normalised loss over every
// target token (the same summed loss as training, divided once by the total)
// and its perplexity exp(loss); optionally a generation eval for short-answer
// data such as the quiz: the prompt of each of the first N examples is
// answered greedily and scored by exact match against the example's target
// text (whitespace trimmed, ASCII case folded, the end-of-sequence token not
// part of either).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ftcore/collate.h"
#include "ftcore/dataset.h"
#include "ftcore/model.h"
#include "ftcore/tokenizer.h"
#include "precision.h"

namespace ftcore::train {

struct GenerationEvalOptions {
  int64_t samples = 0;  // 0: no generation eval
  int64_t max_new_tokens = 32;
  std::vector<int64_t> stop_token_ids;
};

struct AnsweredExample {
  std::string prompt, expected, generated;
  bool correct = false;
};

struct EvalResult {
  double loss = 0.0;
  double perplexity = 0.0;
  int64_t target_tokens = 0;
  std::optional<double> exact_match;   // fraction in [0, 1]
  std::vector<AnsweredExample> answers;  // the generation eval's, in order
};

// Runs with grad off and the model in eval mode (restored to training mode after).
EvalResult evaluate(Model& model, const std::vector<Example>& validation, int64_t batch_size,
                    const CollateOptions& collate_options, const Precision& precision, const Tokenizer& tokenizer,
                    const GenerationEvalOptions& generation);

// The exact-match rule above (exposed for tests).
bool answers_match(const std::string& generated, const std::string& expected);

}  // namespace ftcore::train

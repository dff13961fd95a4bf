// Evaluation on the validation split: the token-normalised loss over every
// target token (the same summed loss as training, divided once by the total)
// and its perplexity exp(loss); optionally a generation eval for short-answer
// data such as the quiz: the prompt of each of the first N examples is
// answered greedily and scored by exact match against the example's target
// text (whitespace trimmed, ASCII case folded, the end-of-sequence token not
// part of either).
//
// Both run batched: loss batches take the rows in length order (so a batch
// pads little) and the prompts decode batch_size at a time, left-padded, in
// prompt-length order (model_generation.h's generate_batch). The numbers are
// those of one row at a time up to float rounding (evaluation_test).
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
  int64_t batch_size = 16;  // prompts decoded together (generate_batch)
  std::vector<int64_t> stop_token_ids;
};

struct AnsweredExample {
  std::string prompt, expected, generated;
  bool correct = false;
};

struct EvalResult {
  double loss = 0.0;
  double perplexity = 0.0;
  double loss_sum = 0.0;  // summed over target tokens (what ranks add up)
  int64_t target_tokens = 0;
  int64_t correct = 0, answered = 0;   // generation eval counts
  std::optional<double> exact_match;   // correct / answered, in [0, 1]
  std::vector<AnsweredExample> answers;  // this rank's generation answers, in order
};

// The share of the validation set one rank evaluates: eval batches of
// batch_size are dealt to ranks in turn (batch j to rank j mod world), as
// the trainer deals global training batches (after sorting the rows by
// length); generation examples likewise one by one. {0, 1} is the whole set.
struct EvalShard {
  int rank = 0;
  int world = 1;
};

// Runs with grad off and the model in eval mode (restored to training mode after).
EvalResult evaluate(Model& model, const std::vector<Example>& validation, int64_t batch_size,
                    const CollateOptions& collate_options, const Precision& precision, const Tokenizer& tokenizer,
                    const GenerationEvalOptions& generation, EvalShard shard = {});

// loss, perplexity and exact_match from the sums (after ranks added theirs).
void finish_eval_result(EvalResult& r);

// The exact-match rule above (exposed for tests).
bool answers_match(const std::string& generated, const std::string& expected);

}  // namespace ftcore::train

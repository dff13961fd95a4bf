// Validation loss, perplexity and generation exact match.
#include "evaluation.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <ATen/ATen.h>

#include "ftcore/model_generation.h"
#include "ftcore/runtime.h"
#include "ftcore/stop_request.h"
#include "next_token_loss.h"

namespace ftcore::train {

namespace {

std::string normalise_answer(const std::string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  std::string out = text.substr(begin, end - begin);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Puts the model in eval mode for a scope and restores training mode after.
class EvalModeScope {
 public:
  explicit EvalModeScope(Model& model) : model_(model), was_training_(model.module().is_training()) {
    model_.module().eval();
  }
  ~EvalModeScope() {
    if (was_training_) model_.module().train();
  }

 private:
  Model& model_;
  bool was_training_;
};

// An example split for the generation eval: the prompt is every token
// before the first target; the answer is the target tokens without a
// trailing stop token.
struct Question {
  std::vector<int64_t> prompt;
  std::vector<int32_t> expected_ids;
};

bool is_stop_token(const GenerationEvalOptions& options, int64_t id) {
  return std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), id) != options.stop_token_ids.end();
}

Question split_question(const Example& example, const GenerationEvalOptions& options) {
  const auto first_target = std::find_if(example.labels.begin(), example.labels.end(),
                                         [](int32_t l) { return l != kIgnoreLabel; });
  const auto prompt_len = static_cast<size_t>(first_target - example.labels.begin());
  Question q;
  q.prompt.assign(example.input_ids.begin(), example.input_ids.begin() + static_cast<long>(prompt_len));
  for (size_t i = prompt_len; i < example.labels.size(); ++i)
    if (example.labels[i] != kIgnoreLabel) q.expected_ids.push_back(example.labels[i]);
  while (!q.expected_ids.empty() && is_stop_token(options, q.expected_ids.back())) q.expected_ids.pop_back();
  return q;
}

AnsweredExample score_answer(const Question& q, const GenerationResult& result, const Tokenizer& tokenizer,
                             const GenerationEvalOptions& options) {
  std::vector<int32_t> generated_ids;
  for (int64_t id : result.tokens)
    if (!is_stop_token(options, id)) generated_ids.push_back(static_cast<int32_t>(id));
  AnsweredExample a;
  a.prompt = tokenizer.decode(std::vector<int32_t>(q.prompt.begin(), q.prompt.end()), /*skip_special_tokens=*/false);
  a.expected = tokenizer.decode(q.expected_ids, /*skip_special_tokens=*/true);
  a.generated = tokenizer.decode(generated_ids, /*skip_special_tokens=*/true);
  a.correct = answers_match(a.generated, a.expected);
  return a;
}

// Positions into `items` sorted by size (stable), so a batch of neighbours
// pads little.
template <typename Item, typename Length>
std::vector<size_t> order_by_length(const std::vector<Item>& items, Length length) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return length(items[a]) < length(items[b]); });
  return order;
}

// The summed loss of this rank's eval batches.
void add_loss(Model& model, const std::vector<Example>& validation, int64_t batch_size,
              const CollateOptions& collate_options, const Precision& precision, EvalShard shard, EvalResult& r) {
  // Padding is masked out of the loss, so padding to sequence_len would only waste work.
  CollateOptions options = collate_options;
  options.pad_to_sequence_len = false;
  const std::vector<size_t> order =
      order_by_length(validation, [](const Example& e) { return e.input_ids.size(); });
  const auto step = static_cast<size_t>(batch_size);
  for (size_t start = step * static_cast<size_t>(shard.rank); start < order.size();
       start += step * static_cast<size_t>(shard.world)) {
    throw_if_stop_requested("evaluation");
    rebalance_threads();  // an evaluation can outlast another run's start or end
    std::vector<std::vector<const Example*>> rows;
    for (size_t i = start; i < std::min(order.size(), start + step); ++i) rows.push_back({&validation[order[i]]});
    TrainBatch batch = collate(rows, options);
    AutocastScope autocast(precision, model.device());
    r.loss_sum += summed_next_token_loss(model, batch).item<double>();
    r.target_tokens += batch.target_tokens;
  }
}

// This rank's generation answers, in example order.
void add_answers(Model& model, const std::vector<Example>& validation, const Precision& precision,
                 const Tokenizer& tokenizer, const GenerationEvalOptions& generation, EvalShard shard, EvalResult& r) {
  const auto n = std::min<size_t>(validation.size(), static_cast<size_t>(std::max<int64_t>(generation.samples, 0)));
  std::vector<Question> questions;
  for (size_t i = static_cast<size_t>(shard.rank); i < n; i += static_cast<size_t>(shard.world))
    questions.push_back(split_question(validation[i], generation));
  SamplingOptions sampling;
  sampling.max_new_tokens = generation.max_new_tokens;
  sampling.stop_token_ids = generation.stop_token_ids;
  const std::vector<size_t> order =
      order_by_length(questions, [](const Question& q) { return q.prompt.size(); });
  r.answers.resize(questions.size());
  const auto step = static_cast<size_t>(std::max<int64_t>(generation.batch_size, 1));
  for (size_t start = 0; start < order.size(); start += step) {
    throw_if_stop_requested("evaluation (generation samples)");
    rebalance_threads();
    std::vector<std::vector<int64_t>> prompts;
    for (size_t k = start; k < std::min(order.size(), start + step); ++k) prompts.push_back(questions[order[k]].prompt);
    AutocastScope autocast(precision, model.device());
    const std::vector<GenerationResult> results = generate_batch(model, prompts, sampling);
    for (size_t k = 0; k < results.size(); ++k) {
      const size_t i = order[start + k];
      r.answers[i] = score_answer(questions[i], results[k], tokenizer, generation);
    }
  }
  for (const AnsweredExample& a : r.answers) r.correct += a.correct ? 1 : 0;
}

}  // namespace

bool answers_match(const std::string& generated, const std::string& expected) {
  return normalise_answer(generated) == normalise_answer(expected);
}

void finish_eval_result(EvalResult& r) {
  r.loss = r.target_tokens > 0 ? r.loss_sum / static_cast<double>(r.target_tokens) : 0.0;
  r.perplexity = std::exp(r.loss);
  if (r.answered > 0) r.exact_match = static_cast<double>(r.correct) / static_cast<double>(r.answered);
}

EvalResult evaluate(Model& model, const std::vector<Example>& validation, int64_t batch_size,
                    const CollateOptions& collate_options, const Precision& precision, const Tokenizer& tokenizer,
                    const GenerationEvalOptions& generation, EvalShard shard) {
  EvalModeScope eval_mode(model);
  at::NoGradGuard no_grad;
  EvalResult r;
  add_loss(model, validation, batch_size, collate_options, precision, shard, r);
  add_answers(model, validation, precision, tokenizer, generation, shard, r);
  r.answered = static_cast<int64_t>(r.answers.size());
  finish_eval_result(r);
  return r;
}

}  // namespace ftcore::train

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

AnsweredExample answer_example(Model& model, const Example& example, const Tokenizer& tokenizer,
                               const GenerationEvalOptions& options) {
  // The prompt is every token before the first target; the answer is the
  // target tokens without a trailing stop token.
  const auto first_target = std::find_if(example.labels.begin(), example.labels.end(),
                                         [](int32_t l) { return l != kIgnoreLabel; });
  const auto prompt_len = static_cast<size_t>(first_target - example.labels.begin());
  std::vector<int64_t> prompt(example.input_ids.begin(), example.input_ids.begin() + static_cast<long>(prompt_len));
  std::vector<int32_t> expected_ids;
  for (size_t i = prompt_len; i < example.labels.size(); ++i)
    if (example.labels[i] != kIgnoreLabel) expected_ids.push_back(example.labels[i]);
  auto is_stop = [&](int64_t id) {
    return std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), id) != options.stop_token_ids.end();
  };
  while (!expected_ids.empty() && is_stop(expected_ids.back())) expected_ids.pop_back();

  SamplingOptions sampling;
  sampling.max_new_tokens = options.max_new_tokens;
  sampling.stop_token_ids = options.stop_token_ids;
  GenerationResult result = generate(model, prompt, sampling);
  std::vector<int32_t> generated_ids;
  for (int64_t id : result.tokens)
    if (!is_stop(id)) generated_ids.push_back(static_cast<int32_t>(id));

  AnsweredExample a;
  a.prompt = tokenizer.decode(std::vector<int32_t>(prompt.begin(), prompt.end()), /*skip_special_tokens=*/false);
  a.expected = tokenizer.decode(expected_ids, /*skip_special_tokens=*/true);
  a.generated = tokenizer.decode(generated_ids, /*skip_special_tokens=*/true);
  a.correct = answers_match(a.generated, a.expected);
  return a;
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
  const auto step = static_cast<size_t>(batch_size);
  for (size_t start = step * static_cast<size_t>(shard.rank); start < validation.size();
       start += step * static_cast<size_t>(shard.world)) {
    throw_if_stop_requested("evaluation");
    rebalance_threads();  // an evaluation can outlast another run's start or end
    std::vector<std::vector<const Example*>> rows;
    for (size_t i = start; i < std::min(validation.size(), start + step); ++i) rows.push_back({&validation[i]});
    TrainBatch batch = collate(rows, collate_options);
    AutocastScope autocast(precision, model.device());
    r.loss_sum += summed_next_token_loss(model, batch).item<double>();
    r.target_tokens += batch.target_tokens;
  }
  const auto n = std::min<size_t>(validation.size(), static_cast<size_t>(std::max<int64_t>(generation.samples, 0)));
  for (size_t i = static_cast<size_t>(shard.rank); i < n; i += static_cast<size_t>(shard.world)) {
    throw_if_stop_requested("evaluation (generation samples)");
    rebalance_threads();
    AutocastScope autocast(precision, model.device());
    r.answers.push_back(answer_example(model, validation[i], tokenizer, generation));
    r.correct += r.answers.back().correct ? 1 : 0;
  }
  r.answered = static_cast<int64_t>(r.answers.size());
  finish_eval_result(r);
  return r;
}

}  // namespace ftcore::train

// Batched evaluation (core/src/train/evaluation.h: loss batches in length
// order, prompts decoded together with generate_batch) against the same
// evaluation one row at a time, on a tiny Llama made by transformers with a
// BPE tokenizer trained at test time (model_reference.py tiny-eval). The
// one-at-a-time path is the reference here: its greedy tokens are checked
// against transformers by model_test, and batching must not change them.
//   fp32: loss within 1e-6 relative (the sums differ only in summation
//         order and matmul blocking), every answer and the count identical.
//   bf16 autocast: loss within 4e-3 relative (bf16 rounds each matmul output
//         to 2^-8 relative, and batching changes the GEMM blocking), and at
//         least 18 of 20 answers identical: a 1-ulp bf16 difference flips an
//         argmax between near-tied tokens of this random model (measured: 19).
#include <gtest/gtest.h>

#include <random>

#include <ATen/ATen.h>

#include "../../core/src/train/evaluation.h"
#include "ftcore/model_generation.h"
#include "ftcore/runtime.h"
#include "test_support.h"

using namespace ftcore;
using namespace ftcore::train;

namespace {

constexpr int64_t kAnswerTokens = 6;

// Rows of varied prompt and answer lengths, in no length order. Even rows
// are answered with the model's own greedy continuation (so exact match
// has hits that batching must keep); odd rows with random tokens.
std::vector<Example> make_examples(Model& model, int32_t stop, int rows) {
  std::mt19937 rng(3);
  const auto vocab = static_cast<int32_t>(model.config().vocab_size);
  std::uniform_int_distribution<int32_t> token(3, vocab - 1);
  std::vector<Example> examples;
  for (int i = 0; i < rows; ++i) {
    const int prompt_len = std::uniform_int_distribution<int>(3, 20)(rng);
    std::vector<int64_t> prompt;
    for (int t = 0; t < prompt_len; ++t) prompt.push_back(token(rng));
    std::vector<int32_t> answer;
    if (i % 2 == 0) {
      SamplingOptions o;
      o.max_new_tokens = kAnswerTokens;
      for (int64_t id : generate(model, prompt, o).tokens) answer.push_back(static_cast<int32_t>(id));
    } else {
      const int answer_len = std::uniform_int_distribution<int>(1, kAnswerTokens)(rng);
      for (int t = 0; t < answer_len; ++t) answer.push_back(token(rng));
    }
    answer.push_back(stop);
    Example e;
    e.input_ids.assign(prompt.begin(), prompt.end());
    e.labels.assign(prompt.size(), kIgnoreLabel);
    e.input_ids.insert(e.input_ids.end(), answer.begin(), answer.end());
    e.labels.insert(e.labels.end(), answer.begin(), answer.end());
    examples.push_back(e);
  }
  return examples;
}

struct Compared {
  EvalResult one, batched;
  int same_answers = 0;
};

Compared compare(Model& model, const std::vector<Example>& examples, const Tokenizer& tokenizer, int32_t stop,
                 const Precision& precision) {
  CollateOptions collate;
  collate.sequence_len = 64;
  collate.pad_to_sequence_len = true;  // the eval ignores it (padding is masked): only the work changes
  GenerationEvalOptions generation;
  generation.samples = 20;  // fewer than the rows: the rest count for the loss only
  generation.max_new_tokens = kAnswerTokens;  // the continuations of the even rows are this long
  generation.stop_token_ids = {stop};
  Compared c;
  generation.batch_size = 1;
  c.one = evaluate(model, examples, /*batch_size=*/1, collate, precision, tokenizer, generation);
  generation.batch_size = 8;
  c.batched = evaluate(model, examples, /*batch_size=*/5, collate, precision, tokenizer, generation);
  for (size_t i = 0; i < std::min(c.one.answers.size(), c.batched.answers.size()); ++i)
    c.same_answers += c.one.answers[i].generated == c.batched.answers[i].generated ? 1 : 0;
  std::cout << "[ measure ] " << precision.name << ": loss one-at-a-time " << c.one.loss << ", batched "
            << c.batched.loss << " (relative diff " << std::abs(c.batched.loss - c.one.loss) / c.one.loss
            << "); exact match " << c.one.correct << " vs " << c.batched.correct << " of " << c.one.answered
            << "; identical answers " << c.same_answers << "\n";
  return c;
}

TEST(Evaluation, BatchedEqualsOneRowAtATime) {
  init_runtime();
  ftcore::testing::TempDir dir;
  ftcore::testing::run_python("reference/model_reference.py",
                              "tiny-eval " + ftcore::testing::shell_quote(dir.path().string()));
  auto model = Model::from_pretrained(dir / "model");
  auto tokenizer = Tokenizer::from_folder(dir / "model");
  ASSERT_TRUE(tokenizer->eos_id().has_value());
  const int32_t stop = *tokenizer->eos_id();
  const std::vector<Example> examples = make_examples(*model, stop, 23);

  const Compared fp32 = compare(*model, examples, *tokenizer, stop, Precision{});
  EXPECT_EQ(fp32.batched.target_tokens, fp32.one.target_tokens);
  EXPECT_NEAR(fp32.batched.loss, fp32.one.loss, 1e-6 * fp32.one.loss);
  EXPECT_NEAR(fp32.batched.perplexity, fp32.one.perplexity, 1e-6 * fp32.one.perplexity);
  ASSERT_EQ(fp32.batched.answers.size(), 20u);
  ASSERT_EQ(fp32.one.answers.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(fp32.batched.answers[i].prompt, fp32.one.answers[i].prompt) << "answer " << i << " out of order";
    EXPECT_EQ(fp32.batched.answers[i].generated, fp32.one.answers[i].generated) << "answer " << i;
  }
  EXPECT_EQ(fp32.batched.correct, fp32.one.correct);
  EXPECT_GE(fp32.one.correct, 8) << "the rows answered with the model's own continuation should match";
  EXPECT_LT(fp32.one.correct, 20) << "the random answers should not match: the comparison would be weak";

  const Compared bf16 = compare(*model, examples, *tokenizer, stop, Precision{"bf16", true, at::kBFloat16});
  EXPECT_NEAR(bf16.batched.loss, bf16.one.loss, 4e-3 * bf16.one.loss);
  EXPECT_GE(bf16.same_answers, 18) << "more answers changed than near-tied argmaxes explain";
  EXPECT_NEAR(bf16.one.loss, fp32.one.loss, 2e-2 * fp32.one.loss) << "bf16 autocast was not near fp32 at all";
}

}  // namespace

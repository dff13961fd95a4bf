// core/src/train/consuming_cross_entropy.h against libtorch's own
// at::cross_entropy_loss (reduction sum) and its autograd backward: the loss
// and the logits' gradient must be equal bit for bit, for vocabularies that
// fill whole blocks, odd ones and one row, under an upstream gradient other
// than 1 (the trainer's loss scale / normaliser); the logits are consumed
// (they hold log-probabilities after the call, then the gradient); a second
// backward, a leaf and bad shapes or dtypes are refused.
#include <gtest/gtest.h>

#include <vector>

#include <ATen/ATen.h>

#include "../../core/src/train/consuming_cross_entropy.h"
#include "test_support.h"

using ftcore::testing::same_bits;

TEST(ConsumingCrossEntropy, LossAndGradientEqualCrossEntropyLoss) {
  at::manual_seed(11);
  struct Case {
    int64_t rows, vocab;
  };
  for (const Case c : std::vector<Case>{{1, 96}, {40, 96}, {413, 49152}, {7, 50257}, {300, 151}}) {
    const at::Tensor source = at::randn({c.rows, c.vocab}) * 4;
    const at::Tensor targets = at::randint(0, c.vocab, {c.rows}, at::kLong);
    const double upstream = 0.37;

    at::Tensor theirs = source.clone().requires_grad_(true);
    const at::Tensor their_loss = at::cross_entropy_loss(theirs, targets, {}, at::Reduction::Sum);
    (their_loss * upstream).backward();

    at::Tensor leaf = source.clone().requires_grad_(true);
    const at::Tensor logits = leaf * 1.0;  // a non-leaf, as lm_head's output is
    const at::Tensor loss = ftcore::train::consuming_cross_entropy_sum(logits, targets);
    const std::string where = std::to_string(c.rows) + " x " + std::to_string(c.vocab);
    EXPECT_TRUE(same_bits(logits, at::log_softmax(source, 1))) << where << ": the logits now hold log-probabilities";
    (loss * upstream).backward();

    EXPECT_TRUE(same_bits(loss, their_loss)) << where << ": " << loss.item<double>() << " vs " << their_loss.item<double>();
    EXPECT_TRUE(same_bits(leaf.grad(), theirs.grad())) << where;
  }
}

TEST(ConsumingCrossEntropy, RefusesASecondBackwardAndBadShapes) {
  const at::Tensor leaf = at::randn({4, 10}).requires_grad_(true);
  const at::Tensor loss = ftcore::train::consuming_cross_entropy_sum(leaf * 1.0, at::randint(0, 10, {4}, at::kLong));
  loss.backward({}, /*retain_graph=*/true);
  EXPECT_THROW(loss.backward(), std::exception);
  EXPECT_THROW(ftcore::train::consuming_cross_entropy_sum(at::randn({4, 10}).t(), at::zeros({10}, at::kLong)),
               std::invalid_argument);
  EXPECT_THROW(ftcore::train::consuming_cross_entropy_sum(at::randn({4, 10}, at::kDouble), at::zeros({4}, at::kLong)),
               std::invalid_argument);
  const at::Tensor leaf_logits = at::randn({4, 10}).requires_grad_(true);  // overwriting it would overwrite a parameter
  EXPECT_THROW(ftcore::train::consuming_cross_entropy_sum(leaf_logits, at::zeros({4}, at::kLong)), std::invalid_argument);
}

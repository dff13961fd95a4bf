// core/src/model/recast_weight_linear.h against what it replaces: at::linear
// under CPU autocast (bf16 and fp16) over a trainable fp32 weight, with
// autograd's own backward. Output, input gradient and weight gradient must
// be equal bit for bit, for 2-D and 3-D inputs in fp32 and in the autocast
// dtype, one row and many, with and without an input gradient; the cases it
// must leave to at::linear (bias, no autocast, no graph, frozen or
// non-contiguous weight, strided or double input) are refused. Then the
// tied embedding / lm_head gradient that rides on it (further below).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "../../core/src/model/recast_weight_linear.h"
#include "../../core/src/model/tied_embedding_gradient.h"
#include "../../core/src/train/precision.h"
#include "test_support.h"

using ftcore::model::linear_recasting_weight;
using ftcore::model::recasting_weight_applies;
using ftcore::testing::same_bits;

namespace {

// CPU autocast in `dtype`, as the trainer sets it for a bf16 / fp16 run.
ftcore::train::Precision autocast_in(at::ScalarType dtype) {
  return {dtype == at::kHalf ? "fp16" : "bf16", true, dtype};
}

struct Gradients {
  at::Tensor y, x_grad, weight_grad;
};

// y = linear(x, weight) under autocast, then backward of sum(y * upstream) in fp32.
Gradients run(const at::Tensor& x_source, const at::Tensor& weight_source, const at::Tensor& upstream,
              at::ScalarType autocast_dtype, bool x_needs_grad, bool recast) {
  at::Tensor x = x_source.clone().requires_grad_(x_needs_grad);
  at::Tensor weight = weight_source.clone().requires_grad_(true);
  at::Tensor y;
  {
    ftcore::train::AutocastScope autocast(autocast_in(autocast_dtype), at::kCPU);
    if (recast) {
      EXPECT_TRUE(recasting_weight_applies(x, weight, at::Tensor()));
      y = linear_recasting_weight(x, weight);
    } else {
      y = at::linear(x, weight);
    }
  }
  (y.to(at::kFloat) * upstream).sum().backward();
  return {y.detach(), x_needs_grad ? x.grad() : at::Tensor(), weight.grad()};
}

}  // namespace

TEST(RecastWeightLinear, EqualsAutocastLinearBitForBit) {
  at::manual_seed(5);
  const std::vector<std::vector<int64_t>> input_shapes = {{5, 7}, {1, 64}, {2, 9, 16}, {3, 1, 64}, {4, 33, 96}, {2, 3, 4, 24}};
  for (const at::ScalarType autocast_dtype : {at::kBFloat16, at::kHalf})
    for (const auto& shape : input_shapes)
      for (const int64_t out : {1, 8, 48})
        for (const at::ScalarType x_dtype : {at::kFloat, autocast_dtype})
          for (const bool x_needs_grad : {true, false}) {
            const at::Tensor x = at::randn(shape).to(x_dtype);
            const at::Tensor weight = at::randn({out, shape.back()}) * 0.2;
            std::vector<int64_t> y_shape(shape.begin(), shape.end() - 1);
            y_shape.push_back(out);
            const at::Tensor upstream = at::randn(y_shape);
            const Gradients theirs = run(x, weight, upstream, autocast_dtype, x_needs_grad, false);
            const Gradients ours = run(x, weight, upstream, autocast_dtype, x_needs_grad, true);
            const std::string where = "autocast " + std::string(c10::toString(autocast_dtype)) + ", x " +
                                      std::string(c10::toString(x_dtype)) + " " + c10::str(at::IntArrayRef(shape)) +
                                      ", out " + std::to_string(out) + (x_needs_grad ? ", x grad" : "");
            EXPECT_TRUE(same_bits(ours.y, theirs.y)) << where;
            EXPECT_TRUE(same_bits(ours.weight_grad, theirs.weight_grad)) << where;
            EXPECT_EQ(ours.weight_grad.strides(), theirs.weight_grad.strides()) << where;
            if (x_needs_grad) EXPECT_TRUE(same_bits(ours.x_grad, theirs.x_grad)) << where;
          }
}

TEST(RecastWeightLinear, LeavesOtherCasesToAtLinear) {
  const at::Tensor x = at::randn({2, 3, 8});
  const at::Tensor weight = at::randn({4, 8}).requires_grad_(true);
  EXPECT_FALSE(recasting_weight_applies(x, weight, at::Tensor())) << "no autocast";
  ftcore::train::AutocastScope autocast(autocast_in(at::kBFloat16), at::kCPU);
  EXPECT_TRUE(recasting_weight_applies(x, weight, at::Tensor()));
  EXPECT_FALSE(recasting_weight_applies(x, weight, at::zeros({4}))) << "a bias";
  EXPECT_FALSE(recasting_weight_applies(x, at::randn({4, 8}), at::Tensor())) << "a frozen weight";
  EXPECT_FALSE(recasting_weight_applies(x, at::randn({8, 4}).requires_grad_(true).t(), at::Tensor())) << "a transposed weight";
  EXPECT_FALSE(recasting_weight_applies(x, at::randn({4, 8}, at::kBFloat16).requires_grad_(true), at::Tensor()))
      << "a weight already in the compute dtype";
  EXPECT_FALSE(recasting_weight_applies(x.transpose(0, 1), weight, at::Tensor())) << "a strided input";
  EXPECT_FALSE(recasting_weight_applies(x.to(at::kDouble), weight, at::Tensor())) << "a double input (autocast keeps it)";
  EXPECT_FALSE(recasting_weight_applies(at::randn({8}), weight, at::Tensor())) << "a vector input";
  {
    at::NoGradGuard no_grad;
    EXPECT_FALSE(recasting_weight_applies(x, weight, at::Tensor())) << "no graph";
  }
  EXPECT_FALSE(recasting_weight_applies(x, weight * 1.0, at::Tensor())) << "a non-leaf weight";
}

// The tied embedding / lm_head gradient (core/src/model/tied_embedding_gradient.h):
// the in-place sum against G1 + at::embedding_dense_backward, including -0s,
// then whole backward passes of a tied pair against at::embedding + autocast's
// at::linear: one pass, two accumulated passes, and passes where only one use
// of the weight is in the graph (no offer, or an offer no embedding takes).

TEST(TiedEmbeddingGradient, InPlaceSumEqualsDenseAdd) {
  at::manual_seed(8);
  const int64_t vocab = 300, hidden = 24;
  const at::Tensor ids = at::randint(0, 40, {3, 17}, at::kLong);  // many repeats, most rows absent
  const at::Tensor grad = at::randn({3, 17, hidden});
  at::Tensor head = at::randn({vocab, hidden});
  head.index_put_({at::arange(0, vocab, 7)}, -0.0);  // -0 rows, present and absent
  const at::Tensor expected = head + at::embedding_dense_backward(grad, ids, vocab, -1, false);
  at::Tensor ours = head.clone();
  ftcore::model::add_embedding_gradient_into(ours, grad, ids);
  EXPECT_TRUE(same_bits(ours, expected));
  EXPECT_FALSE(same_bits(head, expected)) << "the -0 rows must have changed sign, or the check is vacuous";
}

namespace {

// loss = sum(lm_head(h * 0.5 + 1) * upstream) with h = embedding(weight, ids), the weight tied.
void tied_pass(const at::Tensor& weight, const at::Tensor& ids, const at::Tensor& upstream, bool ours, bool use_embedding,
               bool use_head) {
  at::Tensor loss = at::zeros({});
  {
    ftcore::train::AutocastScope autocast(autocast_in(at::kBFloat16), at::kCPU);
    const at::Tensor h = use_embedding ? (ours ? ftcore::model::embedding_summing_into_tied_head(weight, ids)
                                               : at::embedding(weight, ids))
                                       : at::randn({ids.size(0), ids.size(1), weight.size(1)});
    if (use_head) {
      const at::Tensor x = h * 0.5 + 1.0;
      const at::Tensor logits = ours ? linear_recasting_weight(x, weight, /*tied_to_embedding=*/true) : at::linear(x, weight);
      loss = (logits.to(at::kFloat) * upstream).sum();
    } else {
      loss = (h * upstream.narrow(-1, 0, 1)).sum();
    }
  }
  loss.backward();
}

}  // namespace

TEST(TiedEmbeddingGradient, BackwardEqualsAutograd) {
  const int64_t vocab = 97, hidden = 32;
  struct Pass {
    bool use_embedding, use_head;
  };
  const std::vector<std::vector<Pass>> schedules = {
      {{true, true}},                  // one step
      {{true, true}, {true, true}},    // two accumulated micro-batches
      {{false, true}, {true, false}},  // an offer no embedding takes, then an embedding alone
      {{true, false}, {true, true}},
  };
  const std::vector<int64_t> sums_expected = {1, 2, 0, 1};  // passes with both uses of the weight
  for (size_t s = 0; s < schedules.size(); ++s) {
    const int64_t sums_before = ftcore::model::tied_gradient_sums_taken();
    at::manual_seed(20 + static_cast<int64_t>(s));
    const at::Tensor source = at::randn({vocab, hidden}) * 0.3;
    at::Tensor theirs = source.clone().requires_grad_(true), mine = source.clone().requires_grad_(true);
    for (const Pass pass : schedules[s]) {
      const at::Tensor ids = at::randint(0, vocab, {2, 9}, at::kLong);
      const at::Tensor upstream = at::randn({2, 9, vocab});
      at::manual_seed(99);
      tied_pass(theirs, ids, upstream, false, pass.use_embedding, pass.use_head);
      at::manual_seed(99);
      tied_pass(mine, ids, upstream, true, pass.use_embedding, pass.use_head);
    }
    EXPECT_TRUE(same_bits(mine.grad(), theirs.grad())) << "schedule " << s;
    EXPECT_EQ(ftcore::model::tied_gradient_sums_taken() - sums_before, sums_expected[s]) << "schedule " << s;
  }
}

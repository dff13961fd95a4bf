// The tied embedding / lm_head gradient (core/src/model/tied_embedding_gradient.h)
// against autograd's own sum. First the in-place sum against G1 +
// at::embedding_dense_backward: -0 rows, int32 ids, and a vocabulary large
// enough that embedding_dense_backward splits its rows between threads. Then
// whole backward passes of a tied pair against at::embedding + at::linear,
// under bf16 autocast and in fp32: one pass, two accumulated passes, passes
// where only one use of the weight is in the graph (no offer, or an offer no
// embedding takes), a third use of the weight whose gradient arrives before
// or after the offered one, and create_graph.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "../../core/src/model/recast_weight_linear.h"
#include "../../core/src/model/tied_embedding_gradient.h"
#include "../../core/src/train/precision.h"
#include "test_support.h"

using ftcore::testing::same_bits;

namespace {

void expect_sum_equals_dense_add(int64_t vocab, int64_t hidden, const at::Tensor& ids, const std::string& where) {
  const at::Tensor grad = at::randn({ids.size(0), ids.size(1), hidden});
  at::Tensor head = at::randn({vocab, hidden});
  head.index_put_({at::arange(0, vocab, 7)}, -0.0);  // -0 rows, present and absent
  const at::Tensor expected = head + at::embedding_dense_backward(grad, ids, vocab, -1, false);
  at::Tensor ours = head.clone();
  ftcore::model::add_embedding_gradient_into(ours, grad, ids);
  EXPECT_TRUE(same_bits(ours, expected)) << where;
  EXPECT_FALSE(same_bits(head, expected)) << where << ": the -0 rows must have changed sign, or the check is vacuous";
}

}  // namespace

TEST(TiedEmbeddingGradient, InPlaceSumEqualsDenseAdd) {
  at::manual_seed(8);
  const at::Tensor ids = at::randint(0, 40, {3, 17}, at::kLong);  // many repeats, most rows absent
  expect_sum_equals_dense_add(300, 24, ids, "int64 ids");
  expect_sum_equals_dense_add(300, 24, ids.to(at::kInt), "int32 ids");
  // Over 1000 rows embedding_dense_backward's parallel_for gives each thread a row range.
  expect_sum_equals_dense_add(5000, 16, at::randint(0, 5000, {8, 300}, at::kLong), "5000 rows, 2400 positions");
}

namespace {

// A third use of the weight, sum(weight * 0.25): recorded first, autograd runs
// its node last (the engine takes ready nodes latest-recorded first), so its
// gradient joins the weight's after the embedding's; recorded last, it runs
// first and the lm_head's gradient is added to it in autograd's buffer.
enum class DirectUse { none, recorded_first, recorded_last };

struct Pass {
  bool use_embedding, use_head;
  DirectUse direct = DirectUse::none;
};

// loss = sum(lm_head(h * 0.5 + 1) * upstream) with h = embedding(weight, ids), the weight tied,
// plus the direct use; under bf16 autocast (a bf16 run) or without it (fp32).
void tied_pass(const at::Tensor& weight, const at::Tensor& ids, const at::Tensor& upstream, bool ours, Pass pass,
               bool create_graph = false, bool autocast_on = true) {
  at::Tensor loss = at::zeros({});
  {
    ftcore::train::AutocastScope autocast(
        autocast_on ? ftcore::train::Precision{"bf16", true, at::kBFloat16} : ftcore::train::Precision{}, at::kCPU);
    const at::Tensor direct_first = pass.direct == DirectUse::recorded_first ? (weight * 0.25).sum() : at::zeros({});
    const at::Tensor h = pass.use_embedding ? (ours ? ftcore::model::embedding_summing_into_tied_head(weight, ids)
                                                    : at::embedding(weight, ids))
                                            : at::randn({ids.size(0), ids.size(1), weight.size(1)});
    if (pass.use_head) {
      const at::Tensor x = h * 0.5 + 1.0;
      const at::Tensor logits =
          ours ? ftcore::model::linear_recasting_weight(x, weight, /*tied_to_embedding=*/true) : at::linear(x, weight);
      loss = (logits.to(at::kFloat) * upstream).sum();
    } else {
      loss = (h * upstream.narrow(-1, 0, 1)).sum();
    }
    if (pass.direct == DirectUse::recorded_last) loss = loss + (weight * 0.25).sum();
    loss = loss + direct_first;
  }
  loss.backward({}, /*retain_graph=*/create_graph, create_graph);
}

}  // namespace

TEST(TiedEmbeddingGradient, BackwardEqualsAutograd) {
  const int64_t vocab = 97, hidden = 32;
  const std::vector<std::vector<Pass>> schedules = {
      {{true, true}},                // one step
      {{true, true}, {true, true}},  // two accumulated micro-batches
      {{false, true}, {true, false}},  // an offer no embedding takes, then an embedding alone
      {{true, false}, {true, true}},
      {{true, true, DirectUse::recorded_first}},
      {{true, true, DirectUse::recorded_last}},
  };
  // Passes with both the embedding and the head, except when the direct use's
  // gradient arrived first: autograd then adds the offered gradient into that
  // one (InputBuffer::accumulate), the offered tensor dies, and the embedding
  // takes the dense path.
  const std::vector<int64_t> sums_expected = {1, 2, 0, 1, 1, 0};
  for (const bool autocast_on : {true, false}) {
    for (size_t s = 0; s < schedules.size(); ++s) {
      const int64_t sums_before = ftcore::model::tied_gradient_sums_taken();
      at::manual_seed(20 + static_cast<int64_t>(s));
      const at::Tensor source = at::randn({vocab, hidden}) * 0.3;
      at::Tensor theirs = source.clone().requires_grad_(true), mine = source.clone().requires_grad_(true);
      for (const Pass pass : schedules[s]) {
        const at::Tensor ids = at::randint(0, vocab, {2, 9}, at::kLong);
        const at::Tensor upstream = at::randn({2, 9, vocab});
        at::manual_seed(99);
        tied_pass(theirs, ids, upstream, false, pass, false, autocast_on);
        at::manual_seed(99);
        tied_pass(mine, ids, upstream, true, pass, false, autocast_on);
      }
      const std::string where = "schedule " + std::to_string(s) + (autocast_on ? ", bf16 autocast" : ", fp32");
      EXPECT_TRUE(same_bits(mine.grad(), theirs.grad())) << where;
      EXPECT_EQ(ftcore::model::tied_gradient_sums_taken() - sums_before, sums_expected[s]) << where;
    }
  }
}

// Under create_graph the lm_head's node refuses (it records no double
// backward), so a tied pair never reaches the in-place sum with a graph on.
TEST(TiedEmbeddingGradient, CreateGraphIsRefusedByTheHead) {
  at::manual_seed(30);
  const at::Tensor weight = (at::randn({50, 16}) * 0.3).requires_grad_(true);
  const at::Tensor ids = at::randint(0, 50, {2, 5}, at::kLong);
  EXPECT_THROW(tied_pass(weight, ids, at::randn({2, 5, 50}), true, {true, true}, /*create_graph=*/true),
               c10::Error);
}

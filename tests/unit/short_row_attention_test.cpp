// core/src/model/short_row_attention.h's node against the graph autograd
// records for libtorch's math attention over the repeated, fp32-cast inputs:
// the output and the gradients of q, k and v bit for bit, with q and k in
// fp32 and v in bf16 as under bf16 autocast (and all fp32), one and three
// query heads per key/value head, the projections' [B, T, heads, D] layout,
// an additive mask with a fully masked row, the causal flag, and gradients
// asked of some inputs only.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>

#include "../../core/src/model/short_row_attention.h"
#include "test_support.h"

using ftcore::testing::same_bits;

namespace {

struct Case {
  int64_t batch, heads, kv_heads, tokens, dim;
  at::ScalarType v_type;
  bool masked, causal;
};

// [B, T, heads, D] viewed as [B, heads, T, D], as the attention receives its projections.
at::Tensor heads_view(int64_t b, int64_t t, int64_t heads, int64_t d, at::ScalarType type) {
  return at::randn({b, t, heads, d}).to(type).transpose(1, 2);
}

}  // namespace

TEST(ShortRowAttention, NodeEqualsTheRecordedMathPath) {
  at::manual_seed(21);
  const std::vector<Case> cases{{2, 9, 3, 7, 64, at::kBFloat16, true, false},
                                {2, 9, 3, 7, 64, at::kBFloat16, false, true},
                                {3, 4, 4, 5, 32, at::kFloat, true, false},
                                {1, 6, 2, 11, 16, at::kFloat, false, false}};
  for (const Case& c : cases) {
    const std::string where = std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " heads, v " +
                              c10::toString(c.v_type) + (c.masked ? ", masked" : "") + (c.causal ? ", causal" : "");
    const int64_t groups = c.heads / c.kv_heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
    const at::Tensor q0 = heads_view(c.batch, c.tokens, c.heads, c.dim, at::kFloat) * 3;
    const at::Tensor k0 = heads_view(c.batch, c.tokens, c.kv_heads, c.dim, at::kFloat) * 3;
    const at::Tensor v0 = heads_view(c.batch, c.tokens, c.kv_heads, c.dim, c.v_type);
    std::optional<at::Tensor> mask;
    if (c.masked) {  // causal, the last query row of batch 0 masked whole (a padded row)
      at::Tensor m = at::zeros({c.batch, 1, c.tokens, c.tokens})
                         .masked_fill(at::ones({c.tokens, c.tokens}, at::kBool).triu(1),
                                      -std::numeric_limits<float>::infinity());
      m[0][0][c.tokens - 1].fill_(-std::numeric_limits<float>::infinity());
      mask = m;
    }
    const at::Tensor grad = at::randn({c.batch, c.tokens, c.heads, c.dim}).transpose(1, 2);  // as o_proj's backward lays it
    for (const int wanted : {0b111, 0b001, 0b110}) {
      const auto leaves = [&] {
        return std::array<at::Tensor, 3>{q0.detach().clone().requires_grad_((wanted & 1) != 0),
                                         k0.detach().clone().requires_grad_((wanted & 2) != 0),
                                         v0.detach().clone().requires_grad_((wanted & 4) != 0)};
      };
      const auto reference = leaves();
      const at::Tensor expected = std::get<0>(at::_scaled_dot_product_attention_math(
          reference[0].to(at::kFloat), ftcore::model::repeat_kv(reference[1], groups).to(at::kFloat),
          ftcore::model::repeat_kv(reference[2], groups).to(at::kFloat), mask, 0.0, c.causal, std::nullopt, scale));
      expected.backward(grad);
      const auto node = leaves();
      const at::Tensor out =
          ftcore::model::short_row_math_attention(node[0] * 1, node[1] * 1, node[2] * 1, mask, groups, c.causal, scale);
      ASSERT_TRUE(out.grad_fn()) << where;
      EXPECT_NE(out.grad_fn()->name().find("ShortRowMathAttention"), std::string::npos) << where;
      EXPECT_TRUE(same_bits(out, expected)) << where;
      out.backward(grad);
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(node[i].grad().defined(), reference[i].grad().defined()) << where << " input " << i;
        if (reference[i].grad().defined())
          EXPECT_TRUE(same_bits(node[i].grad(), reference[i].grad())) << where << " input " << i << " of " << wanted;
      }
    }
  }
}

// core/src/model/fused_norm_rope.h's row loops against the ATen op chains
// they replace (rms_norm_aten_chain / rotary_aten_chain, the code autograd records): the
// same bits for fp32 and bf16, every gain style, row sizes across the sum's
// 8-lane tails and 16-step chunks, one row and many, a [B, T, heads, D]
// transposed view and broadcast cos/sin as the attention passes them, and
// mixed dtypes (bf16 activations with fp32 cos/sin, as under autocast). With
// a graph to record, the chains run and gradients flow.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "../../core/src/model/fused_norm_rope.h"
#include "../../core/src/model/fused_norm_rope_kernel.h"
#include "ftcore/sdk/cpu_isa.h"
#include "test_support.h"

using ftcore::RmsNormStyle;
using ftcore::testing::same_bits;

TEST(FusedNormRope, ProcessCheckPasses) { EXPECT_TRUE(ftcore::model::fused_norm_rope_match_aten()); }

TEST(FusedNormRope, RmsNormEqualsTheOpChain) {
  at::manual_seed(5);
  at::NoGradGuard no_grad;
  for (const int64_t size : {8, 9, 31, 64, 128, 576, 960, 1000, 2048, 4103, 8192, 8200, 20000}) {
    for (const int64_t rows : {1, 3, 64}) {
      for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
        // Rows of very different scales: the sum's order shows in its low bits.
        const at::Tensor x = (at::randn({rows, size}) * at::rand({rows, 1}) * 40).to(type);
        const at::Tensor w = (at::randn({size}) * 0.3 + 1).to(type);
        for (const RmsNormStyle style : {RmsNormStyle::llama, RmsNormStyle::fp32_gain, RmsNormStyle::unit_offset}) {
          for (const double eps : {1e-6, 1e-5}) {
            const std::string where = std::to_string(rows) + " x " + std::to_string(size) + " " +
                                      c10::toString(type) + " style " + std::to_string(static_cast<int>(style));
            EXPECT_TRUE(same_bits(ftcore::model::rms_norm(x, w, eps, style), ftcore::model::rms_norm_aten_chain(x, w, eps, style)))
                << where;
          }
        }
      }
    }
  }
}

TEST(FusedNormRope, RmsNormOnPerHeadRows) {  // Qwen3's q_norm: [B, T, heads, D] rows of D
  at::manual_seed(6);
  at::NoGradGuard no_grad;
  const at::Tensor q = at::randn({2, 7, 4, 128}).to(at::kBFloat16);
  const at::Tensor w = (at::randn({128}) * 0.2 + 1).to(at::kBFloat16);
  EXPECT_TRUE(same_bits(ftcore::model::rms_norm(q, w, 1e-6, RmsNormStyle::llama),
                        ftcore::model::rms_norm_aten_chain(q, w, 1e-6, RmsNormStyle::llama)));
}

TEST(FusedNormRope, RotaryEqualsTheOpChain) {
  at::manual_seed(7);
  at::NoGradGuard no_grad;
  struct Case {
    int64_t batch, tokens, heads, dim, trig_batch;
    at::ScalarType x_type, trig_type;
  };
  const std::vector<Case> cases{{4, 33, 9, 64, 4, at::kBFloat16, at::kBFloat16},
                                {4, 33, 3, 64, 1, at::kBFloat16, at::kBFloat16},
                                {2, 5, 4, 128, 2, at::kFloat, at::kFloat},
                                {3, 17, 2, 32, 3, at::kBFloat16, at::kFloat},
                                {1, 1, 8, 96, 1, at::kFloat, at::kBFloat16}};
  for (const Case c : cases) {
    // As the attention makes it: [B, T, heads, D] projected, viewed as [B, heads, T, D].
    const at::Tensor x = (at::randn({c.batch, c.tokens, c.heads, c.dim}) * 3).to(c.x_type).transpose(1, 2);
    const at::Tensor angles = at::rand({c.trig_batch, c.tokens, c.dim}) * 100;
    const at::Tensor cos = angles.cos().to(c.trig_type).unsqueeze(1), sin = angles.sin().to(c.trig_type).unsqueeze(1);
    const std::string where = std::to_string(c.batch) + "x" + std::to_string(c.heads) + "x" + std::to_string(c.tokens) +
                              "x" + std::to_string(c.dim) + " " + c10::toString(c.x_type) + "/" +
                              c10::toString(c.trig_type);
    const at::Tensor expected = ftcore::model::rotary_aten_chain(x, cos, sin);
    const at::Tensor before = x.clone();
    // x stays held here, so the call must leave it as it was.
    EXPECT_TRUE(same_bits(ftcore::model::rotary(at::Tensor(x), cos, sin), expected)) << where;
    EXPECT_TRUE(same_bits(x, before)) << where;
    // Only this function holds the copy: the result is written over it (when the dtypes allow).
    at::Tensor copy = x.clone();
    const void* copy_data = copy.data_ptr();
    const at::Tensor rotated = ftcore::model::rotary(std::exchange(copy, at::Tensor()), cos, sin);
    EXPECT_TRUE(same_bits(rotated, expected)) << where << " (in place)";
    EXPECT_EQ(rotated.data_ptr() == copy_data, c10::promoteTypes(c.x_type, c.trig_type) == c.x_type) << where;
  }
}

TEST(FusedNormRope, RotaryOnContiguousHeads) {  // [B, heads, T, D] stored as such: rows visited heads-outer
  at::manual_seed(9);
  at::NoGradGuard no_grad;
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = at::randn({2, 3, 5, 32}).to(type);
    const at::Tensor angles = at::rand({2, 1, 5, 32}) * 100;
    const at::Tensor cos = angles.cos().to(type), sin = angles.sin().to(type);
    const at::Tensor expected = ftcore::model::rotary_aten_chain(x, cos, sin);
    EXPECT_TRUE(same_bits(ftcore::model::rotary(x.clone(), cos, sin), expected)) << c10::toString(type);
  }
}

// The attention's case: a [B, heads, T, D] view of a projection's output. While
// someone else holds the base, the base is left alone; when only the view keeps
// it, the result is written over it.
TEST(FusedNormRope, RotaryOnViewsOfAHeldOrAnUnheldBase) {
  at::manual_seed(10);
  at::NoGradGuard no_grad;
  const at::Tensor angles = at::rand({1, 1, 6, 64}) * 100;
  const at::Tensor cos = angles.cos().to(at::kBFloat16), sin = angles.sin().to(at::kBFloat16);
  const at::Tensor base = at::randn({2, 6, 4, 64}).to(at::kBFloat16);
  const at::Tensor before = base.clone();
  const at::Tensor expected = ftcore::model::rotary_aten_chain(base.transpose(1, 2), cos, sin);
  EXPECT_TRUE(same_bits(ftcore::model::rotary(base.transpose(1, 2), cos, sin), expected));
  EXPECT_TRUE(same_bits(base, before)) << "a held base was written";

  at::Tensor unheld = before.clone().transpose(1, 2);  // the base lives in the view only
  const void* data = unheld.data_ptr();
  const at::Tensor rotated = ftcore::model::rotary(std::move(unheld), cos, sin);
  EXPECT_TRUE(same_bits(rotated, expected));
  EXPECT_EQ(rotated.data_ptr(), data) << "the view's storage was not reused";
}

// Every ISA variant of the row loops this CPU can run gives the chain's bits
// (the dispatcher runs only the best one).
TEST(FusedNormRope, EveryIsaVariantEqualsTheChain) {
  using namespace ftcore::model;
  at::manual_seed(11);
  at::NoGradGuard no_grad;
  std::vector<std::pair<const char*, RmsNormRowsKernel>> variants{{"generic", &rms_norm_rows_generic}};
  const ftcore::sdk::CpuIsa isa = ftcore::sdk::detect_cpu_isa();
  if (isa == ftcore::sdk::CpuIsa::Avx2 || isa == ftcore::sdk::CpuIsa::Avx512) variants.push_back({"avx2", &rms_norm_rows_avx2});
  if (isa == ftcore::sdk::CpuIsa::Avx512) variants.push_back({"avx512", &rms_norm_rows_avx512});
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const at::Tensor x = (at::randn({9, 8200}) * at::rand({9, 1}) * 30).to(type);
    const at::Tensor w = (at::randn({8200}) * 0.3 + 1).to(type);
    const at::Tensor expected = rms_norm_aten_chain(x, w, 1e-6, RmsNormStyle::llama);
    for (const auto& [name, kernel] : variants) {
      at::Tensor out = at::empty_like(x);
      const RmsNormRows p{x.data_ptr(), w.data_ptr(), out.data_ptr(), 8200, 1e-6f,
                          type == at::kBFloat16 ? RowDtype::bf16 : RowDtype::f32, GainOrder::after_cast};
      kernel(p, 0, 9);
      EXPECT_TRUE(same_bits(out, expected)) << name << " " << c10::toString(type);
    }
  }
}

TEST(FusedNormRope, PartialRotaryAndGraphsTakeTheOpChain) {
  at::manual_seed(8);
  const at::Tensor x = at::randn({1, 2, 3, 64});
  const at::Tensor angles = at::rand({1, 1, 3, 32});
  const at::Tensor cos = angles.cos(), sin = angles.sin();
  {
    at::NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(ftcore::model::rotary(at::Tensor(x), cos, sin), ftcore::model::rotary_aten_chain(x, cos, sin)));
  }
  const at::Tensor leaf = x.clone().requires_grad_(true);
  const at::Tensor full = at::rand({1, 1, 3, 64});
  const at::Tensor rotated = ftcore::model::rotary(at::Tensor(leaf), full.cos(), full.sin());
  ASSERT_TRUE(rotated.requires_grad());
  rotated.sum().backward();
  ASSERT_TRUE(leaf.grad().defined());

  const at::Tensor w = at::ones({64}).requires_grad_(true);
  ftcore::model::rms_norm(x, w, 1e-6, RmsNormStyle::llama).sum().backward();
  EXPECT_TRUE(w.grad().defined());
}

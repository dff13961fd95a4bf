// core/src/model/fused_norm_rope.h's row loops against the ATen op chains
// they replace (rms_norm_aten_chain / rotary_aten_chain, the code autograd records): the
// same bits for fp32 and bf16, every gain style, row sizes across the sum's
// 8-lane tails and 16-step chunks, one row and many, a [B, T, heads, D]
// transposed view and broadcast cos/sin as the attention passes them, and
// mixed dtypes (bf16 activations with fp32 cos/sin, as under autocast). With
// a graph to record through the activations only, RoPE and the llama RMSNorm
// are autograd nodes whose results and gradients are autograd's through the
// chains, bit for bit; otherwise the chains run.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/function.h>

#include "../../core/src/model/fused_norm_rope.h"
#include "../../core/src/model/fused_norm_rope_kernel.h"
#include "ftcore/sdk/cpu_isa.h"
#include "test_support.h"

using ftcore::RmsNormStyle;
using ftcore::testing::same_bits;

namespace {

// Whether t's autograd node is one of the fused nodes (its name holds `node`).
bool made_by(const at::Tensor& t, const std::string& node) {
  return t.grad_fn() && t.grad_fn()->name().find(node) != std::string::npos;
}

}  // namespace

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

// Where a graph is recorded through x, RoPE is one autograd node: its result and
// x's gradient are autograd's through the op chain, bit for bit. The incoming
// gradient has exact zeros (their -0 products meet in the sums).
TEST(FusedNormRope, EveryIsaVariantOfTheRotaryGradientEqualsAutograds) {
  using namespace ftcore::model;
  at::manual_seed(13);
  std::vector<std::pair<const char*, RotaryGradRowsKernel>> variants{{"generic", &rotary_grad_rows_generic}};
  const ftcore::sdk::CpuIsa isa = ftcore::sdk::detect_cpu_isa();
  if (isa == ftcore::sdk::CpuIsa::Avx2 || isa == ftcore::sdk::CpuIsa::Avx512) variants.push_back({"avx2", &rotary_grad_rows_avx2});
  if (isa == ftcore::sdk::CpuIsa::Avx512) variants.push_back({"avx512", &rotary_grad_rows_avx512});
  for (const at::ScalarType x_type : {at::kFloat, at::kBFloat16}) {
    for (const at::ScalarType trig_type : {at::kFloat, at::kBFloat16}) {
      const at::ScalarType grad_type = c10::promoteTypes(x_type, trig_type);
      const at::Tensor leaf = at::randn({2, 3, 7, 64}).to(x_type).requires_grad_(true);
      const at::Tensor angles = at::rand({1, 1, 7, 64}) * 100;
      const at::Tensor cos = angles.cos().to(trig_type), sin = angles.sin().to(trig_type);
      at::Tensor grad = at::randn({2, 3, 7, 64}).to(grad_type);
      grad.view({-1}).slice(0, 0, grad.numel(), 4).zero_();
      rotary_aten_chain(leaf, cos, sin).backward(grad);
      const auto dtype_of = [](at::ScalarType t) { return t == at::kBFloat16 ? RowDtype::bf16 : RowDtype::f32; };
      for (const auto& [name, kernel] : variants) {
        at::Tensor grad_x = at::empty({2, 3, 7, 64}, at::TensorOptions().dtype(x_type));
        RotaryGradRows p{grad.data_ptr(), cos.data_ptr(), sin.data_ptr(), grad_x.data_ptr(), {2, 3, 7}, 64,
                         {3 * 7 * 64, 7 * 64, 64}, {0, 0, 64}, {3 * 7 * 64, 7 * 64, 64},
                         dtype_of(grad_type), dtype_of(trig_type), dtype_of(x_type)};
        kernel(p, 0, 2 * 3 * 7);
        EXPECT_TRUE(same_bits(grad_x, leaf.grad())) << name << " " << c10::toString(x_type) << "/" << c10::toString(trig_type);
      }
    }
  }
}

TEST(FusedNormRope, RotaryNodeGradientEqualsTheChains) {
  at::manual_seed(12);
  struct Case {
    int64_t batch, tokens, heads, dim, trig_batch;
    at::ScalarType x_type, trig_type;
    bool transposed;
  };
  const std::vector<Case> cases{{4, 33, 9, 64, 4, at::kBFloat16, at::kBFloat16, true},
                                {2, 17, 3, 64, 1, at::kBFloat16, at::kFloat, true},
                                {2, 5, 4, 128, 2, at::kFloat, at::kFloat, true},
                                {3, 6, 2, 32, 1, at::kFloat, at::kBFloat16, false},
                                {1, 1, 8, 96, 1, at::kBFloat16, at::kFloat, false}};
  for (const Case c : cases) {
    const std::string where = std::to_string(c.batch) + "x" + std::to_string(c.heads) + "x" + std::to_string(c.tokens) +
                              "x" + std::to_string(c.dim) + " " + c10::toString(c.x_type) + "/" +
                              c10::toString(c.trig_type) + (c.transposed ? " transposed" : " contiguous");
    const at::Tensor angles = at::rand({c.trig_batch, c.tokens, c.dim}) * 100;
    const at::Tensor cos = angles.cos().to(c.trig_type).unsqueeze(1), sin = angles.sin().to(c.trig_type).unsqueeze(1);
    const at::Tensor values = c.transposed ? (at::randn({c.batch, c.tokens, c.heads, c.dim}) * 3).to(c.x_type).transpose(1, 2)
                                           : (at::randn({c.batch, c.heads, c.tokens, c.dim}) * 3).to(c.x_type);
    at::Tensor grad = at::randn({c.batch, c.heads, c.tokens, c.dim}).to(c10::promoteTypes(c.x_type, c.trig_type));
    grad.view({-1}).slice(0, 0, grad.numel(), 3).zero_();
    if (c.transposed) grad = grad.transpose(1, 2).contiguous().transpose(1, 2);  // as the attention's backward may lay it

    const at::Tensor chain_leaf = values.detach().clone().requires_grad_(true);
    const at::Tensor expected = ftcore::model::rotary_aten_chain(chain_leaf, cos, sin);
    expected.backward(grad);
    // A non-leaf x, as the projection's output is: the node's gradient flows on to it.
    const at::Tensor node_leaf = values.detach().clone().requires_grad_(true);
    const at::Tensor rotated = ftcore::model::rotary(node_leaf * 1, cos, sin);
    EXPECT_TRUE(made_by(rotated, "RotaryNode")) << where;
    EXPECT_TRUE(same_bits(rotated, expected)) << where;
    rotated.backward(grad);
    ASSERT_TRUE(node_leaf.grad().defined()) << where;
    EXPECT_TRUE(same_bits(node_leaf.grad(), chain_leaf.grad())) << where;
  }
}

// Where a graph is recorded through x and not the gain, the llama RMSNorm is one
// autograd node: its result and x's gradient are autograd's through the chain.
TEST(FusedNormRope, RmsNormNodeGradientEqualsTheChains) {
  at::manual_seed(14);
  for (const int64_t size : {8, 9, 31, 576, 1000, 2048, 8200}) {
    for (const int64_t rows : {1, 3, 64}) {
      for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
        const std::string where = std::to_string(rows) + " x " + std::to_string(size) + " " + c10::toString(type);
        const at::Tensor values = (at::randn({rows, size}) * at::rand({rows, 1}) * 40).to(type);
        const at::Tensor w = (at::randn({size}) * 0.3 + 1).to(type);
        at::Tensor grad = at::randn({rows, size}).to(type);
        grad.view({-1}).slice(0, 0, grad.numel(), 7).zero_();
        const at::Tensor chain_leaf = values.clone().requires_grad_(true);
        const at::Tensor expected = ftcore::model::rms_norm_aten_chain(chain_leaf, w, 1e-5, RmsNormStyle::llama);
        expected.backward(grad);
        const at::Tensor node_leaf = values.clone().requires_grad_(true);
        const at::Tensor normed = ftcore::model::rms_norm(node_leaf * 1, w, 1e-5, RmsNormStyle::llama);
        EXPECT_TRUE(made_by(normed, "RmsNormNode")) << where;
        EXPECT_TRUE(same_bits(normed, expected)) << where;
        normed.backward(grad);
        EXPECT_TRUE(same_bits(node_leaf.grad(), chain_leaf.grad())) << where;
      }
    }
  }
}

// Per-head rows (Qwen3's q_norm), and a gradient that arrives in another
// layout (the node then differentiates the chain itself).
TEST(FusedNormRope, RmsNormNodeOnPerHeadRowsAndTransposedGradients) {
  at::manual_seed(15);
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const at::Tensor values = at::randn({2, 7, 4, 128}).to(type);
    const at::Tensor w = (at::randn({128}) * 0.2 + 1).to(type);
    for (const bool transposed_grad : {false, true}) {
      at::Tensor grad = at::randn({2, 7, 4, 128}).to(type);
      if (transposed_grad) grad = grad.transpose(1, 2).contiguous().transpose(1, 2);
      const at::Tensor chain_leaf = values.clone().requires_grad_(true);
      ftcore::model::rms_norm_aten_chain(chain_leaf, w, 1e-6, RmsNormStyle::llama).backward(grad);
      const at::Tensor node_leaf = values.clone().requires_grad_(true);
      const at::Tensor normed = ftcore::model::rms_norm(node_leaf * 1, w, 1e-6, RmsNormStyle::llama);
      EXPECT_TRUE(made_by(normed, "RmsNormNode"));
      normed.backward(grad);
      EXPECT_TRUE(same_bits(node_leaf.grad(), chain_leaf.grad()))
          << c10::toString(type) << (transposed_grad ? " transposed gradient" : "");
    }
  }
}

// A decoder layer's use of the norm: the residual stream x feeds the norm and
// the residual add, so x's gradient is the sum of the residual's and the
// norm's, and for fp32 x the norm's two parts arrive separately
// (((residual + through h * r) + through the squares); fp32 addition is not
// associative). The node's sums are the chain's, bit for bit.
TEST(FusedNormRope, RmsNormNodeUnderAResidualEqualsTheChains) {
  at::manual_seed(17);
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const at::Tensor values = (at::randn({4, 9, 576}) * 3).to(type);
    const at::Tensor w = (at::randn({576}) * 0.3 + 1).to(type);
    const at::Tensor projection = (at::randn({576, 576}) * 0.05).to(type);
    const at::Tensor grad = at::randn({4, 9, 576}).to(type);
    const auto layer = [&](const at::Tensor& leaf, bool fused) {
      const at::Tensor x = leaf * 1;
      const at::Tensor normed = fused ? ftcore::model::rms_norm(x, w, 1e-5, RmsNormStyle::llama)
                                      : ftcore::model::rms_norm_aten_chain(x, w, 1e-5, RmsNormStyle::llama);
      if (fused) EXPECT_TRUE(made_by(normed, "RmsNormNode"));
      return x + at::matmul(normed, projection);
    };
    const at::Tensor chain_leaf = values.clone().requires_grad_(true);
    layer(chain_leaf, false).backward(grad);
    const at::Tensor node_leaf = values.clone().requires_grad_(true);
    layer(node_leaf, true).backward(grad);
    EXPECT_TRUE(same_bits(node_leaf.grad(), chain_leaf.grad())) << c10::toString(type);
  }
}

TEST(FusedNormRope, EveryIsaVariantOfTheRmsNormGradientEqualsAutograds) {
  using namespace ftcore::model;
  at::manual_seed(16);
  std::vector<std::pair<const char*, RmsNormGradRowsKernel>> variants{{"generic", &rms_norm_grad_rows_generic}};
  const ftcore::sdk::CpuIsa isa = ftcore::sdk::detect_cpu_isa();
  if (isa == ftcore::sdk::CpuIsa::Avx2 || isa == ftcore::sdk::CpuIsa::Avx512) variants.push_back({"avx2", &rms_norm_grad_rows_avx2});
  if (isa == ftcore::sdk::CpuIsa::Avx512) variants.push_back({"avx512", &rms_norm_grad_rows_avx512});
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const at::Tensor leaf = (at::randn({9, 8200}) * at::rand({9, 1}) * 30).to(type).requires_grad_(true);
    const at::Tensor w = (at::randn({8200}) * 0.3 + 1).to(type);
    const at::Tensor grad = at::randn({9, 8200}).to(type);
    rms_norm_aten_chain(leaf, w, 1e-6, RmsNormStyle::llama).backward(grad);
    for (const auto& [name, kernel] : variants) {
      at::Tensor grad_x = at::empty_like(grad);
      const RmsNormGradRows p{leaf.data_ptr(), w.data_ptr(), grad.data_ptr(), grad_x.data_ptr(), nullptr, 8200, 1e-6f,
                              type == at::kBFloat16 ? RowDtype::bf16 : RowDtype::f32};
      kernel(p, 0, 9);
      EXPECT_TRUE(same_bits(grad_x, leaf.grad())) << name << " " << c10::toString(type);
    }
  }
}

TEST(FusedNormRope, PartialRotaryTrainableAnglesAndGainsTakeTheOpChain) {
  at::manual_seed(8);
  const at::Tensor x = at::randn({1, 2, 3, 64});
  const at::Tensor angles = at::rand({1, 1, 3, 32});
  const at::Tensor cos = angles.cos(), sin = angles.sin();
  {
    at::NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(ftcore::model::rotary(at::Tensor(x), cos, sin), ftcore::model::rotary_aten_chain(x, cos, sin)));
  }
  const at::Tensor leaf = x.clone().requires_grad_(true);
  const at::Tensor rotated = ftcore::model::rotary(at::Tensor(leaf), cos, sin);
  ASSERT_TRUE(rotated.requires_grad());
  EXPECT_FALSE(made_by(rotated, "RotaryNode"));  // partial: the chain
  rotated.sum().backward();
  ASSERT_TRUE(leaf.grad().defined());

  const at::Tensor full = at::rand({1, 1, 3, 64});
  const at::Tensor trainable_cos = full.cos().requires_grad_(true);
  const at::Tensor turned = ftcore::model::rotary(at::Tensor(leaf), trainable_cos, full.sin());
  EXPECT_FALSE(made_by(turned, "RotaryNode"));  // the node has no gradient for cos
  turned.sum().backward();
  EXPECT_TRUE(trainable_cos.grad().defined());

  // A trainable gain, or another gain order: the chain.
  const at::Tensor w = at::ones({64}).requires_grad_(true);
  const at::Tensor normed = ftcore::model::rms_norm(x, w, 1e-6, RmsNormStyle::llama);
  EXPECT_FALSE(made_by(normed, "RmsNormNode"));
  normed.sum().backward();
  EXPECT_TRUE(w.grad().defined());
  const at::Tensor offset = ftcore::model::rms_norm(at::Tensor(leaf), at::ones({64}), 1e-6, RmsNormStyle::unit_offset);
  EXPECT_FALSE(made_by(offset, "RmsNormNode"));
}

// core/src/model/widened_gemm.h against exact arithmetic: the bf16 GEMM
// computed as an fp32 GEMM of the widened operands must be a faithful bf16
// rounding of the exact sum of products (fp64 GEMM of the same bf16 values:
// every product and every partial sum of these sizes is exact or within
// 2^-53 there), off it by at most half a bf16 step plus fp32 summation's
// error bound k * 2^-24 * sum |a b|, and equal to the sum rounded once in all
// but a small fraction of outputs; libtorch's own bf16 GEMM is held to the
// same bound and printed beside it. The frozen-weight Linear node: its output
// and input gradient are the widened GEMMs (also inside an autocast region,
// which must not lower them to bf16 again), within the same bounds. The fp32
// weight's rounding made in its widened copy equals libtorch's cast. A wide
// product (an lm_head over many rows) in column pieces, within the same bounds. Refused:
// the lm_head over few rows (casts cost more than they save), fp32 weights
// without autocast, fp16 autocast, trainable weights where grad mode is on,
// FTCORE_WIDEN_BF16_GEMM=0.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "../../core/src/model/recast_weight_linear.h"
#include "../../core/src/model/short_row_attention.h"
#include "../../core/src/model/widened_gemm.h"
#include "../../core/src/train/precision.h"
#include "test_support.h"

using ftcore::model::frozen_weight_linear_widens;
using ftcore::model::linear_on_frozen_weight;
using ftcore::model::low_precision_mm;
using ftcore::testing::same_bits;
using ftcore::testing::ScopedEnv;

namespace {

at::Tensor bf16_randn(std::vector<int64_t> sizes, uint64_t seed) {
  at::manual_seed(seed);
  return at::randn(sizes, at::kFloat).to(at::kBFloat16);
}

// Half a bf16 step (8 significand bits) at |v|: 2^(exponent of v - 8).
at::Tensor half_bf16_step(const at::Tensor& v) {
  return at::pow(2.0, at::floor(at::log2(v.abs().clamp_min(1e-30))) - 8);
}

struct Faithfulness {
  double worst_excess = 0;     // max of |ours - exact| - bound, <= 0 when within it
  double rounded_once = 0;     // fraction of outputs equal to the exact sum rounded once
};

// ours (bf16) vs the exact products a b (+ bias) of the same bf16 values.
Faithfulness faithfulness(const at::Tensor& ours, const at::Tensor& a, const at::Tensor& b,
                          const at::Tensor& bias = at::Tensor()) {
  at::Tensor exact = a.to(at::kDouble).mm(b.to(at::kDouble));
  at::Tensor magnitude = a.to(at::kDouble).abs().mm(b.to(at::kDouble).abs());
  if (bias.defined()) {
    exact = exact + bias.to(at::kDouble);
    magnitude = magnitude + bias.to(at::kDouble).abs();
  }
  const int64_t k = a.size(1);
  const at::Tensor ours_d = ours.to(at::kDouble);
  // Half a step at the larger of the two (a rounding that crosses a power of two).
  const at::Tensor bound = half_bf16_step(at::maximum(exact.abs(), ours_d.abs())) + magnitude * (k * std::ldexp(1.0, -24));
  Faithfulness f;
  f.worst_excess = ((ours_d - exact).abs() - bound).max().item<double>();
  f.rounded_once = ours.eq(exact.to(at::kBFloat16)).to(at::kFloat).mean().item<double>();
  return f;
}

void expect_faithful(const char* what, const at::Tensor& ours, const at::Tensor& a, const at::Tensor& b,
                     const at::Tensor& bias = at::Tensor()) {
  ASSERT_EQ(ours.scalar_type(), at::kBFloat16) << what;
  const Faithfulness f = faithfulness(ours, a, b, bias);
  std::cout << "[ measure ] " << what << ": equal to the exact sum rounded once in " << f.rounded_once * 100
            << "% of outputs, worst excess over the bound " << f.worst_excess << "\n";
  EXPECT_LE(f.worst_excess, 0.0) << what;
  EXPECT_GE(f.rounded_once, 0.99) << what;
}

}  // namespace

// The default model's MLP and attention shapes, a transposed weight (x W^T) and a plain one (grad W).
TEST(WidenedGemm, FaithfulRoundingOfTheExactSumsLikeLibtorchsBf16Gemm) {
  const at::Tensor x = bf16_randn({344, 576}, 1), weight = bf16_randn({1536, 576}, 2), grad = bf16_randn({344, 1536}, 3);
  for (const char* widen : {"1", "0"}) {
    ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", widen);
    const std::string side = widen[0] == '1' ? "widened" : "libtorch bf16";
    expect_faithful((side + " x W^T").c_str(), low_precision_mm(x, weight.t()), x, weight.t());
    expect_faithful((side + " grad W").c_str(), low_precision_mm(grad, weight), grad, weight);
    expect_faithful((side + " grad^T x").c_str(), low_precision_mm(grad.t(), x), grad.t(), x);
  }
}

TEST(WidenedGemm, BiasJoinsTheFp32SumsBeforeTheOneRounding) {
  ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "1");
  const at::Tensor x = bf16_randn({256, 576}, 4), weight = bf16_randn({576, 576}, 5), bias = bf16_randn({576}, 6);
  expect_faithful("widened x W^T + b", low_precision_mm(x, weight.t(), bias), x, weight.t(), bias);
}

// An lm_head over many rows (evaluation, a forward over every position): the vocabulary's
// columns go in pieces whose copy and sums stay in the kept buffers (576 x 32868 fp32 is
// over the 4 Mi elements of a piece; 32868 is no multiple of a piece, so the last is short).
// Each output must still be its own column's sum: placed, biased and rounded as a whole GEMM's.
TEST(WidenedGemm, WideProductsInColumnPiecesKeepEveryOutput) {
  ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "1");
  const at::Tensor x = bf16_randn({128, 576}, 34), head = bf16_randn({32868, 576}, 35), bias = bf16_randn({32868}, 36);
  expect_faithful("lm_head x W^T + b in pieces", low_precision_mm(x, head.t(), bias), x, head.t(), bias);
  const at::Tensor plain = head.t().contiguous();  // a [k, n] b: its pieces are strided views
  expect_faithful("x b in pieces", low_precision_mm(x, plain), x, plain);
  at::manual_seed(37);
  const at::Tensor head32 = at::randn({32868, 576}, at::kFloat);
  EXPECT_TRUE(same_bits(ftcore::model::low_precision_mm_casting_b(x, head32.t()),
                        low_precision_mm(x, head32.to(at::kBFloat16).t())));
}

// Off, or where the casts would cost more than the GEMM saves, it is libtorch's GEMM bit for bit.
TEST(WidenedGemm, LeavesLibtorchsGemmWhereItDoesNotPay) {
  const at::Tensor x = bf16_randn({344, 576}, 7), weight = bf16_randn({1536, 576}, 8);
  {
    ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "0");
    EXPECT_FALSE(ftcore::model::widens_bf16_gemms());
    EXPECT_TRUE(same_bits(low_precision_mm(x, weight.t()), x.mm(weight.t())));
  }
  ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "1");
  EXPECT_TRUE(ftcore::model::widens_bf16_gemms());
  // An lm_head over a step's 33 target rows: 33 x 576 x 8192 / (33 x 576 + 576 x 8192) = 32.9 multiply-adds per cast.
  const at::Tensor rows = bf16_randn({33, 576}, 9), head = bf16_randn({8192, 576}, 10);
  EXPECT_TRUE(same_bits(low_precision_mm(rows, head.t()), rows.mm(head.t())));
  // LoRA's rank-8 product.
  const at::Tensor lora_a = bf16_randn({8, 576}, 11);
  EXPECT_TRUE(same_bits(low_precision_mm(x, lora_a.t()), x.mm(lora_a.t())));
  // fp32 operands are not bf16 ones.
  const at::Tensor x32 = x.to(at::kFloat), w32 = weight.to(at::kFloat);
  EXPECT_TRUE(same_bits(low_precision_mm(x32, w32.t()), x32.mm(w32.t())));
}

// Under bf16 autocast, an fp32 x [B, T, in] on autocast's bf16 copy of a frozen weight:
// the output is the widened GEMM of x rounded to bf16 (autocast must not run it in bf16
// again), and x's gradient the widened grad W, cast back to fp32.
TEST(WidenedGemm, FrozenWeightLinearUnderAutocastRunsTheWidenedGemms) {
  ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "1");
  at::manual_seed(12);
  const at::Tensor x_source = at::randn({4, 86, 576}, at::kFloat);
  const at::Tensor weight = bf16_randn({1536, 576}, 13), upstream = bf16_randn({4, 86, 1536}, 14);
  at::Tensor x = x_source.clone().requires_grad_(true);
  at::Tensor y;
  {
    ftcore::train::AutocastScope autocast({"bf16", true, at::kBFloat16}, at::kCPU);
    ASSERT_TRUE(frozen_weight_linear_widens(x, weight, at::Tensor()));
    y = linear_on_frozen_weight(x, weight, at::Tensor());
  }
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{4, 86, 1536}));
  y.backward(upstream);
  const at::Tensor low_x = x_source.to(at::kBFloat16).reshape({-1, 576});
  EXPECT_TRUE(same_bits(y.detach().reshape({-1, 1536}), low_precision_mm(low_x, weight.t())));
  expect_faithful("frozen-weight Linear output", y.detach().reshape({-1, 1536}), low_x, weight.t());
  ASSERT_EQ(x.grad().scalar_type(), at::kFloat);
  const at::Tensor grad_rows = upstream.reshape({-1, 1536});
  EXPECT_TRUE(same_bits(x.grad().reshape({-1, 576}), low_precision_mm(grad_rows, weight).to(at::kFloat)));
  expect_faithful("frozen-weight Linear input gradient", x.grad().reshape({-1, 576}).to(at::kBFloat16), grad_rows,
                  weight);
}

// A full fine-tune's trainable fp32 weight (recast_weight_linear.h): its three GEMMs are widened too.
TEST(WidenedGemm, RecastWeightLinearWidensItsThreeGemms) {
  ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "1");
  at::manual_seed(21);
  const at::Tensor x_source = at::randn({344, 576}, at::kFloat), upstream = bf16_randn({344, 1536}, 22);
  at::Tensor weight = (at::randn({1536, 576}, at::kFloat) * 0.05).requires_grad_(true);
  at::Tensor x = x_source.clone().requires_grad_(true);
  at::Tensor y;
  {
    ftcore::train::AutocastScope autocast({"bf16", true, at::kBFloat16}, at::kCPU);
    ASSERT_TRUE(ftcore::model::recasting_weight_applies(x, weight, at::Tensor()));
    y = ftcore::model::linear_recasting_weight(x, weight);
  }
  y.backward(upstream);
  const at::Tensor low_x = x_source.to(at::kBFloat16), low_w = weight.detach().to(at::kBFloat16);
  EXPECT_TRUE(same_bits(y.detach(), low_precision_mm(low_x, low_w.t())));
  expect_faithful("recast Linear output", y.detach(), low_x, low_w.t());
  EXPECT_TRUE(same_bits(x.grad(), low_precision_mm(upstream, low_w).to(at::kFloat)));
  expect_faithful("recast Linear input gradient", x.grad().to(at::kBFloat16), upstream, low_w);
  EXPECT_TRUE(same_bits(weight.grad(), low_precision_mm(upstream.t(), low_x).to(at::kFloat)));
  expect_faithful("recast Linear weight gradient", weight.grad().to(at::kBFloat16), upstream.t(), low_x);
}

// bf16_rounded is libtorch's cast to bf16 and back, in one pass: every fp32 high half
// (both signs, zeros, subnormals, infinities, NaNs) with the low halves that decide the
// rounding (none, the least, just below and at and above the tie, all), for even and odd
// high halves alike; a NaN stays a NaN (its payload may differ between libtorch's own
// vectorised and scalar casts).
TEST(WidenedGemm, Bf16RoundedIsLibtorchsCastThereAndBack) {
  std::vector<int32_t> bits;
  for (uint32_t high = 0; high < 65536; ++high)
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      bits.push_back(static_cast<int32_t>(high << 16 | low));
  const at::Tensor values =
      at::from_blob(bits.data(), {static_cast<int64_t>(bits.size())}, at::kInt).clone().view(at::kFloat);
  const at::Tensor ours = ftcore::model::bf16_rounded(values);
  const at::Tensor libtorch = values.to(at::kBFloat16).to(at::kFloat);
  const at::Tensor nan = values.isnan();
  EXPECT_TRUE(ours.isnan().equal(nan));
  EXPECT_TRUE(same_bits(ours.masked_fill(nan, 0), libtorch.masked_fill(nan, 0)));
}

// RecastWeightLinear's GEMMs on its fp32 weight: the rounding made in the widened copy, and
// the sums rounded in place, give the bits of casting to bf16 first (and widening the
// result back), widened or not; an fp32 a (a tied lm_head without autocast) takes b as it is.
TEST(WidenedGemm, CastingInTheWidenedCopyGivesTheBitsOfCastingFirst) {
  at::manual_seed(31);
  const at::Tensor weight = at::randn({1536, 576}, at::kFloat) * 0.05;
  const at::Tensor x = bf16_randn({344, 576}, 32), grad = bf16_randn({344, 1536}, 33);
  const at::Tensor low_w = weight.to(at::kBFloat16);
  for (const char* widen : {"1", "0"}) {
    ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", widen);
    EXPECT_TRUE(same_bits(ftcore::model::low_precision_mm_casting_b(x, weight.t()), low_precision_mm(x, low_w.t())))
        << widen;
    EXPECT_TRUE(same_bits(ftcore::model::low_precision_mm_casting_b(grad, weight), low_precision_mm(grad, low_w)))
        << widen;
    const at::Tensor grad_weight = ftcore::model::low_precision_mm_to_float(grad.t(), x);
    ASSERT_EQ(grad_weight.scalar_type(), at::kFloat);
    EXPECT_TRUE(same_bits(grad_weight, low_precision_mm(grad.t(), x).to(at::kFloat))) << widen;
  }
  const at::Tensor x32 = x.to(at::kFloat);
  EXPECT_TRUE(same_bits(ftcore::model::low_precision_mm_casting_b(x32, weight.t()), x32.mm(weight.t())));
}

// A bf16 model without autocast (bf16 weights loaded as they are), with a frozen bias.
TEST(WidenedGemm, FrozenWeightLinearOnABf16ModelWithBias) {
  ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "1");
  const at::Tensor x = bf16_randn({2, 128, 576}, 15), weight = bf16_randn({576, 576}, 16), bias = bf16_randn({576}, 17);
  ASSERT_TRUE(frozen_weight_linear_widens(x, weight, bias));
  at::NoGradGuard no_grad;
  const at::Tensor y = linear_on_frozen_weight(x, weight, bias);
  expect_faithful("bf16 model Linear with bias", y.reshape({-1, 576}), x.reshape({-1, 576}), weight.t(), bias);
}

TEST(WidenedGemm, FrozenWeightLinearRefusesWhatAtLinearMustDo) {
  const at::Tensor x = bf16_randn({2, 128, 576}, 18), weight = bf16_randn({576, 576}, 19);
  {
    ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "0");
    EXPECT_FALSE(frozen_weight_linear_widens(x, weight, at::Tensor()));
  }
  ScopedEnv env("FTCORE_WIDEN_BF16_GEMM", "1");
  EXPECT_TRUE(frozen_weight_linear_widens(x, weight, at::Tensor()));
  const at::Tensor trainable = weight.clone().requires_grad_(true);
  EXPECT_FALSE(frozen_weight_linear_widens(x, trainable, at::Tensor()));
  const at::Tensor x32 = x.to(at::kFloat), w32 = weight.to(at::kFloat);
  EXPECT_FALSE(frozen_weight_linear_widens(x32, w32, at::Tensor()));  // an fp32 run
  EXPECT_FALSE(frozen_weight_linear_widens(x32, weight, at::Tensor()));  // fp32 x, no autocast: at::linear's error
  EXPECT_FALSE(frozen_weight_linear_widens(x.reshape({-1}), weight, at::Tensor()));  // 1-D
  const at::Tensor trainable_bias = bf16_randn({576}, 20).requires_grad_(true);
  EXPECT_FALSE(frozen_weight_linear_widens(x, weight, trainable_bias));
  {  // evaluation and generation of a trained model: nothing is recorded, nothing needs grad W
    at::NoGradGuard no_grad;
    EXPECT_TRUE(frozen_weight_linear_widens(x, trainable, at::Tensor()));
    EXPECT_TRUE(frozen_weight_linear_widens(x, weight, trainable_bias));
    const at::Tensor y = linear_on_frozen_weight(x, trainable, trainable_bias);
    EXPECT_FALSE(y.requires_grad());
    expect_faithful("trainable weight under no-grad", y.reshape({-1, 576}), x.reshape({-1, 576}), weight.t(),
                    trainable_bias.detach());
    // A checkpointed layer's first forward takes the path of its recomputation, which records.
    ftcore::model::CheckpointPassScope first(ftcore::model::CheckpointPass::first_forward);
    EXPECT_FALSE(frozen_weight_linear_widens(x, trainable, at::Tensor()));
    EXPECT_TRUE(frozen_weight_linear_widens(x, weight, at::Tensor()));
  }
  {
    ftcore::train::AutocastScope fp16({"fp16", true, at::kHalf}, at::kCPU);
    EXPECT_FALSE(frozen_weight_linear_widens(x32, weight.to(at::kHalf), at::Tensor()));
  }
  ftcore::train::AutocastScope bf16({"bf16", true, at::kBFloat16}, at::kCPU);
  EXPECT_TRUE(frozen_weight_linear_widens(x32, weight, w32.select(0, 0)));  // fp32 x and bias: autocast casts them
}

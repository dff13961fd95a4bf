// core/src/model/recast_weight_linear.h against what it replaces: at::linear
// under CPU autocast (bf16 and fp16) over a trainable fp32 weight, with
// autograd's own backward. Output, input gradient and weight gradient must
// be equal bit for bit, for 2-D and 3-D inputs in fp32 and in the autocast
// dtype, one row and many, with and without an input gradient; and without
// autocast, as a tied lm_head, against at::linear in fp32. The cases it must
// leave to at::linear (bias, no autocast unless tied, no graph, frozen or
// non-contiguous weight, strided or double input, a non-fp32 input to a tied
// head without autocast) are refused. bf16 GEMMs are libtorch's here
// (FTCORE_WIDEN_BF16_GEMM=0); widened_gemm_test covers the widened ones.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "../../core/src/model/recast_weight_linear.h"
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

// y = linear(x, weight) under autocast in `autocast_dtype` (kFloat: autocast
// off, the weight a tied lm_head's), then backward of sum(y * upstream) in fp32.
Gradients run(const at::Tensor& x_source, const at::Tensor& weight_source, const at::Tensor& upstream,
              at::ScalarType autocast_dtype, bool x_needs_grad, bool recast) {
  at::Tensor x = x_source.clone().requires_grad_(x_needs_grad);
  at::Tensor weight = weight_source.clone().requires_grad_(true);
  at::Tensor y;
  {
    const bool autocast_on = autocast_dtype != at::kFloat;
    const bool tied = !autocast_on;
    ftcore::train::AutocastScope autocast(autocast_on ? autocast_in(autocast_dtype) : ftcore::train::Precision{},
                                          at::kCPU);
    if (recast) {
      EXPECT_TRUE(recasting_weight_applies(x, weight, at::Tensor(), tied));
      y = linear_recasting_weight(x, weight, tied);
    } else {
      y = at::linear(x, weight);
    }
  }
  (y.to(at::kFloat) * upstream).sum().backward();
  return {y.detach(), x_needs_grad ? x.grad() : at::Tensor(), weight.grad()};
}

}  // namespace

TEST(RecastWeightLinear, EqualsAutocastLinearBitForBit) {
  // libtorch's bf16 GEMM on both sides (widened_gemm_test checks the widened one).
  ftcore::testing::ScopedEnv libtorch_gemm("FTCORE_WIDEN_BF16_GEMM", "0");
  at::manual_seed(5);
  const std::vector<std::vector<int64_t>> input_shapes = {{5, 7}, {1, 64}, {2, 9, 16}, {3, 1, 64}, {4, 33, 96}, {2, 3, 4, 24}};
  for (const at::ScalarType autocast_dtype : {at::kBFloat16, at::kHalf, at::kFloat})  // kFloat: off, a tied head
    for (const auto& shape : input_shapes)
      for (const int64_t out : {1, 8, 48})
        for (const at::ScalarType x_dtype : autocast_dtype == at::kFloat ? std::vector<at::ScalarType>{at::kFloat}
                                                                         : std::vector<at::ScalarType>{at::kFloat, autocast_dtype})
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
  EXPECT_TRUE(recasting_weight_applies(x, weight, at::Tensor(), /*tied_to_embedding=*/true)) << "no autocast, tied";
  EXPECT_FALSE(recasting_weight_applies(x.to(at::kBFloat16), weight, at::Tensor(), true))
      << "no autocast, tied, a bf16 input (at::linear throws on it)";
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

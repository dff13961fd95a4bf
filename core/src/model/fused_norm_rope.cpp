// fused_norm_rope.h: the op chains, which path runs, and the one-time check
// of the row loops against the chains.
#include "fused_norm_rope.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include "../util/same_bits.h"
#include "fused_norm_rope_nodes.h"
#include "fused_norm_rope_rows.h"
#include "records_graph.h"

namespace ftcore::model {

at::Tensor rms_norm_aten_chain(const at::Tensor& x, const at::Tensor& weight, double eps, RmsNormStyle style) {
  // The statistic in fp32 whatever the dtype; where the gain meets it is the
  // family's rounding order (identical in fp32, one rounding apart in bf16).
  at::Tensor h = x.to(at::kFloat);
  h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  if (style == RmsNormStyle::fp32_gain) return (weight.to(at::kFloat) * h).to(x.scalar_type());
  if (style == RmsNormStyle::unit_offset) return (h * (weight.to(at::kFloat) + 1.0)).to(x.scalar_type());
  return weight * h.to(x.scalar_type());
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, RmsNormStyle style) {
  RowDtype dtype;
  if (!rms_norm_rows_apply(x, weight, dtype) || !fused_norm_rope_match_aten())
    return rms_norm_aten_chain(x, weight, eps, style);
  if (!records_graph({x, weight})) return rms_norm_rows(x, weight, eps, style, dtype);
  // The node differentiates x only, in the llama gain order.
  if (weight.requires_grad() || style != RmsNormStyle::llama) return rms_norm_aten_chain(x, weight, eps, style);
  return rms_norm_recording_x(x, weight, eps);
}

namespace {

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

at::Tensor rotary_aten_chain(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t rotary_dims = cos.size(-1), dim = x.size(-1);
  if (rotary_dims == dim) return x * cos + rotate_half(x) * sin;
  at::Tensor turned = x.narrow(-1, 0, rotary_dims);
  turned = turned * cos + rotate_half(turned) * sin;
  return at::cat({turned, x.narrow(-1, rotary_dims, dim - rotary_dims)}, -1);
}

at::Tensor rotary(at::Tensor&& x, const at::Tensor& cos, const at::Tensor& sin) {
  RowDtype x_dtype, trig_dtype;
  if (!rotary_rows_apply(x, cos, sin, x_dtype, trig_dtype) || !fused_norm_rope_match_aten())
    return rotary_aten_chain(x, cos, sin);
  if (!records_graph({x, cos, sin})) return rotary_rows(x, cos, sin, x_dtype, trig_dtype, /*may_overwrite_x=*/true);
  // The node differentiates x only (RoPE's angles come from positions, not parameters).
  if (cos.requires_grad() || sin.requires_grad()) return rotary_aten_chain(x, cos, sin);
  return rotary_recording_x(x, cos, sin);
}

bool fused_norm_rope_match_aten() {
  static const bool match = [] {
    at::NoGradGuard no_grad;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(20261204);
    bool all = true;
    // Row sizes on both sides of the sum's 16-step chunks and 8-lane tails.
    // 8200: 256 groups of 4 vectors, the first size whose cascade reaches its third level.
    for (const int64_t size : {8, 100, 576, 1000, 2056, 8200}) {
      for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
        const at::Tensor x = (at::randn({5, size}, gen) * 3).to(type);
        const at::Tensor w = (at::randn({size}, gen) * 0.5 + 1).to(type);
        RowDtype dtype;
        if (!rms_norm_rows_apply(x, w, dtype)) return false;
        for (const RmsNormStyle style : {RmsNormStyle::llama, RmsNormStyle::fp32_gain, RmsNormStyle::unit_offset})
          all = all && same_bits(rms_norm_rows(x, w, 1e-6, style, dtype), rms_norm_aten_chain(x, w, 1e-6, style));
        // The gradient autograd takes through the llama chain.
        const at::Tensor grad = at::randn({5, size}, gen).to(type);
        const at::Tensor leaf = x.detach().requires_grad_(true);
        {
          at::AutoGradMode enable_grad(true);
          rms_norm_aten_chain(leaf, w, 1e-6, RmsNormStyle::llama).backward(grad);
        }
        all = all && same_bits(rms_norm_grad_rows(x, w, grad, 1e-6, dtype, /*parts=*/false)[0], leaf.grad());
      }
    }
    for (const at::ScalarType x_type : {at::kFloat, at::kBFloat16}) {
      for (const at::ScalarType trig_type : {at::kFloat, at::kBFloat16}) {
        const at::Tensor x = at::randn({2, 5, 3, 64}, gen).to(x_type).transpose(1, 2);  // [B, heads, T, D] view
        const at::Tensor angles = at::rand({1, 1, 5, 64}, gen) * 10;
        const at::Tensor cos = angles.cos().to(trig_type), sin = angles.sin().to(trig_type);
        RowDtype xd, td;
        if (!rotary_rows_apply(x, cos, sin, xd, td)) return false;
        const at::Tensor expected = rotary_aten_chain(x, cos, sin);
        all = all && same_bits(rotary_rows(x, cos, sin, xd, td, /*may_overwrite_x=*/true), expected);
        // The gradient autograd takes through the chain (x's values, overwritten above, do not enter it).
        // Zeros in the incoming gradient give -0 products, whose sums autograd settles to +0.
        const at::Tensor grad = at::randn({2, 3, 5, 64}, gen).to(expected.scalar_type());
        grad.view({-1}).slice(0, 0, grad.numel(), 5).zero_();
        const at::Tensor leaf = x.detach().requires_grad_(true);
        {
          at::AutoGradMode enable_grad(true);
          rotary_aten_chain(leaf, cos, sin).backward(grad);
        }
        all = all && same_bits(rotary_grad_rows(grad, cos, sin, at::empty_like(x, x.options().device(at::kMeta))),
                               leaf.grad());
      }
    }
    if (!all)
      spdlog::warn("RMSNorm/RoPE row loops differ from this libtorch's op chains; the op chains run (slower)");
    return all;
  }();
  return match;
}

}  // namespace ftcore::model

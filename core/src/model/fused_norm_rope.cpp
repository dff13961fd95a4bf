// fused_norm_rope.h: when the row loops apply, the ISA choice, and the
// one-time check against the op chains.
#include "fused_norm_rope.h"

#include <algorithm>
#include <array>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ftcore/sdk/multi_tensor.h"
#include "../util/same_bits.h"
#include "fused_norm_rope_kernel.h"
#include "records_graph.h"
#include "reusable_in_place.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Kernels {
  RmsNormRowsKernel rms_norm;
  RmsNormGradRowsKernel rms_norm_grad;
  RotaryRowsKernel rotary;
  RotaryGradRowsKernel rotary_grad;
};

Kernels generic_kernels() {
  return {&rms_norm_rows_generic, &rms_norm_grad_rows_generic, &rotary_rows_generic, &rotary_grad_rows_generic};
}
Kernels avx2_kernels() {
  return {&rms_norm_rows_avx2, &rms_norm_grad_rows_avx2, &rotary_rows_avx2, &rotary_grad_rows_avx2};
}
Kernels avx512_kernels() {
  return {&rms_norm_rows_avx512, &rms_norm_grad_rows_avx512, &rotary_rows_avx512, &rotary_grad_rows_avx512};
}

const Kernels& chosen_kernels() { return sdk::kernels_for_this_cpu(&generic_kernels, &avx2_kernels, &avx512_kernels); }

bool row_dtype(const at::Tensor& t, RowDtype& out) {
  if (t.scalar_type() == at::kFloat) {
    out = RowDtype::f32;
  } else if (t.scalar_type() == at::kBFloat16) {
    out = RowDtype::bf16;
  } else {
    return false;
  }
  return true;
}

// Rows per parallel chunk: about 16K elements, as ATen's elementwise grain.
int64_t grain_rows(int64_t row_size) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_size)); }

GainOrder gain_order(RmsNormStyle style) {
  switch (style) {
    case RmsNormStyle::fp32_gain: return GainOrder::fp32_gain;
    case RmsNormStyle::unit_offset: return GainOrder::unit_offset;
    default: return GainOrder::after_cast;
  }
}

at::Tensor rms_norm_rows(const at::Tensor& x, const at::Tensor& weight, double eps, RmsNormStyle style,
                         RowDtype dtype) {
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t size = x.size(-1), rows = x.numel() / size;
  const RmsNormRows p{x.data_ptr(), weight.data_ptr(), out.data_ptr(), size, static_cast<float>(eps), dtype,
                      gain_order(style)};
  const RmsNormRowsKernel kernel = chosen_kernels().rms_norm;
  at::parallel_for(0, rows, grain_rows(size), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return out;
}

// The gradient of x from the contiguous gradient of rms_norm_rows' result
// (llama gain order, gain without gradient): one tensor, or for fp32 x its
// two parts {through h * r, through h.pow(2)} (RmsNormGradRows).
std::vector<at::Tensor> rms_norm_grad_rows(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad,
                                           double eps, RowDtype dtype, bool parts) {
  std::vector<at::Tensor> out{at::empty_like(x, at::MemoryFormat::Contiguous)};
  if (parts) out.push_back(at::empty_like(out[0]));
  const int64_t size = x.size(-1), rows = x.numel() / size;
  const RmsNormGradRows p{x.data_ptr(),          weight.data_ptr(), grad.data_ptr(), out[0].data_ptr(),
                          parts ? out[1].data_ptr() : nullptr, size, static_cast<float>(eps), dtype};
  const RmsNormGradRowsKernel kernel = chosen_kernels().rms_norm_grad;
  at::parallel_for(0, rows, grain_rows(size), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return out;
}

// rms_norm_aten_chain's llama order for an fp32 x with x's two uses apart:
// `scaled` is h in h * r, `squared` the h whose mean square makes r (the same
// tensor in the model).
at::Tensor llama_chain_two_uses(const at::Tensor& scaled, const at::Tensor& squared, const at::Tensor& weight,
                                double eps) {
  return weight * (scaled * at::rsqrt(squared.pow(2).mean(-1, /*keepdim=*/true) + eps));
}

// RMSNorm (llama gain order) where a graph is recorded through x and not
// through the gain (a LoRA run's frozen norms): the row loops forward, and
// backward autograd's gradient through the chain in one pass per row
// (fused_norm_rope_kernel.h RmsNormGradRows), where the chain runs 8 ops
// forward and 13 backward and keeps x's fp32 copy and the normalised rows.
// Keeps x and the gain; recomputes the row statistic.
//
// An fp32 x is the chain's h itself (x.to(f32) is a no-op), so autograd adds
// h's two gradients into x's buffer one after the other, after whatever
// arrived first (the residual's), and fp32 addition is not associative: the
// node takes x twice, the second time as `x_for_squares`, and returns the
// two parts on the two edges, in the chain's order. A bf16 x is cast first,
// and the parts are summed before the cast back, in one tensor on the first
// edge.
class RmsNormNode : public torch::autograd::Function<RmsNormNode> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& x_for_squares,
                            const at::Tensor& weight, double eps) {
    RowDtype dtype;
    row_dtype(x, dtype);
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["parts"] = x_for_squares.scalar_type() == at::kFloat;
    return rms_norm_rows(x, weight, eps, RmsNormStyle::llama, dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "RMSNorm: no double backward (create_graph)");
    variable_list result(4);  // x, x again for the squares, then none for the gain and eps
    if (!grad_outputs[0].defined() || !ctx->needs_input_grad(0)) return result;
    const variable_list saved = ctx->get_saved_variables();
    const double eps = ctx->saved_data["eps"].toDouble();
    const bool parts = ctx->saved_data["parts"].toBool();
    const at::Tensor& grad = grad_outputs[0];
    if (!grad.is_contiguous()) {
      // The chain's row sum would then run over another layout, in another order: differentiate the chain itself.
      const at::Tensor scaled = saved[0].detach().requires_grad_(true);
      const at::Tensor squared = parts ? saved[0].detach().requires_grad_(true) : scaled;
      at::Tensor out;
      {
        at::AutoGradMode enable_grad(true);
        out = parts ? llama_chain_two_uses(scaled, squared, saved[1], eps)
                    : rms_norm_aten_chain(scaled, saved[1], eps, RmsNormStyle::llama);
      }
      const variable_list grads =
          torch::autograd::grad({out}, parts ? variable_list{scaled, squared} : variable_list{scaled}, {grad});
      std::copy(grads.begin(), grads.end(), result.begin());
      return result;
    }
    RowDtype dtype;
    row_dtype(saved[0], dtype);
    const std::vector<at::Tensor> grads = rms_norm_grad_rows(saved[0], saved[1], grad, eps, dtype, parts);
    std::copy(grads.begin(), grads.end(), result.begin());
    return result;
  }
};

// The row loops apply: CPU, contiguous rows of fp32 or bf16 with a gain of
// the same dtype, and rows at::sum reduces whole with its vectorised inner
// loop (at least 8 elements; a single row under ATen's 32768-element grain).
bool rms_norm_rows_apply(const at::Tensor& x, const at::Tensor& weight, RowDtype& dtype) {
  if (!x.device().is_cpu() || x.dim() == 0 || !x.is_contiguous() || !weight.is_contiguous()) return false;
  if (!row_dtype(x, dtype) || weight.scalar_type() != x.scalar_type()) return false;
  const int64_t size = x.size(-1);
  if (size < 8 || weight.numel() != size || x.numel() == 0) return false;
  return !(x.numel() == size && size >= at::internal::GRAIN_SIZE);
}

// The grid of rotary rows over a [B, heads, T, D] tensor laid out as `layout`:
// (batch, heads, tokens), or (batch, tokens, heads) when the heads lie closer
// in memory (the attention's transposed view), so rows are visited as stored.
std::array<int, 3> row_grid(const at::Tensor& layout) {
  const bool heads_inner = layout.stride(1) < layout.stride(2);
  return {0, heads_inner ? 2 : 1, heads_inner ? 1 : 2};
}

int64_t trig_stride(const at::Tensor& cos, int dim) {
  // cos/sin [B or 1, 1, T, D]: no stride along heads, none along a broadcast batch.
  return dim == 1 || cos.size(dim) == 1 ? 0 : cos.stride(dim);
}

at::Tensor rotary_rows(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RowDtype x_dtype,
                       RowDtype trig_dtype, bool may_overwrite_x) {
  const at::ScalarType out_type = at::promote_types(x.scalar_type(), cos.scalar_type());
  // Over x when only the caller holds it (the projection's fresh output); else x's layout (dense views keep strides).
  at::Tensor out = may_overwrite_x && out_type == x.scalar_type() && reusable_in_place(x)
                       ? x
                       : at::empty_like(x, x.options().dtype(out_type));
  RotaryRows p{};
  p.x = x.data_ptr();
  p.cos = cos.data_ptr();
  p.sin = sin.data_ptr();
  p.out = out.data_ptr();
  p.dim = x.size(3);
  const std::array<int, 3> dims = row_grid(x);
  for (int i = 0; i < 3; ++i) {
    p.sizes[i] = x.size(dims[i]);
    p.x_strides[i] = x.stride(dims[i]);
    p.out_strides[i] = out.stride(dims[i]);
    p.trig_strides[i] = trig_stride(cos, dims[i]);
  }
  p.x_dtype = x_dtype;
  p.trig_dtype = trig_dtype;
  p.out_dtype = out_type == at::kBFloat16 ? RowDtype::bf16 : RowDtype::f32;
  const RotaryRowsKernel kernel = chosen_kernels().rotary;
  const int64_t rows = p.sizes[0] * p.sizes[1] * p.sizes[2];
  at::parallel_for(0, rows, grain_rows(p.dim), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return out;
}

// The row loops apply: CPU, x [B, heads, T, D] and cos/sin [B or 1, 1, T, D]
// (whole heads rotated) with unit last strides, fp32 or bf16, cos and sin alike.
bool rotary_rows_apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RowDtype& x_dtype,
                       RowDtype& trig_dtype) {
  if (!x.device().is_cpu() || x.dim() != 4 || cos.dim() != 4 || x.numel() == 0) return false;
  if (!row_dtype(x, x_dtype) || !row_dtype(cos, trig_dtype) || sin.scalar_type() != cos.scalar_type()) return false;
  if (cos.sizes() != sin.sizes() || cos.strides() != sin.strides() || cos.size(1) != 1) return false;
  if (cos.size(0) != x.size(0) && cos.size(0) != 1) return false;
  if (cos.size(2) != x.size(2) || cos.size(3) != x.size(3) || x.size(3) % 2 != 0) return false;
  return x.stride(3) == 1 && cos.stride(3) == 1;
}

// The gradient of x, laid out as `x_layout` (a meta tensor), from the
// gradient of rotary_rows' result.
at::Tensor rotary_grad_rows(const at::Tensor& grad_out, const at::Tensor& cos, const at::Tensor& sin,
                            const at::Tensor& x_layout) {
  const at::Tensor grad = grad_out.stride(3) == 1 ? grad_out : grad_out.contiguous();
  at::Tensor grad_x = at::empty_strided(x_layout.sizes(), x_layout.strides(), grad.options().dtype(x_layout.dtype()));
  RotaryGradRows p{};
  p.grad = grad.data_ptr();
  p.cos = cos.data_ptr();
  p.sin = sin.data_ptr();
  p.grad_x = grad_x.data_ptr();
  p.dim = grad.size(3);
  const std::array<int, 3> dims = row_grid(grad);
  for (int i = 0; i < 3; ++i) {
    p.sizes[i] = grad.size(dims[i]);
    p.grad_strides[i] = grad.stride(dims[i]);
    p.grad_x_strides[i] = grad_x.stride(dims[i]);
    p.trig_strides[i] = trig_stride(cos, dims[i]);
  }
  row_dtype(grad, p.grad_dtype);
  row_dtype(cos, p.trig_dtype);
  row_dtype(grad_x, p.x_dtype);
  const RotaryGradRowsKernel kernel = chosen_kernels().rotary_grad;
  const int64_t rows = p.sizes[0] * p.sizes[1] * p.sizes[2];
  at::parallel_for(0, rows, grain_rows(p.dim), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return grad_x;
}

// RoPE where a graph is recorded through x (not through cos and sin): the row
// loops forward, and backward the gradient autograd computes through the op
// chain (fused_norm_rope_kernel.h RotaryGradRows), in one pass each way where
// the chain runs 5 ops forward and 9 backward, two of them zero-filled
// [B, heads, T, D] tensors. Keeps cos and sin, not x.
class RotaryNode : public torch::autograd::Function<RotaryNode> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    RowDtype x_dtype, trig_dtype;
    row_dtype(x, x_dtype);
    row_dtype(cos, trig_dtype);
    ctx->save_for_backward({cos, sin});
    // x's dtype, sizes and dense layout, with no storage: what the gradient is allocated like.
    ctx->saved_data["x_layout"] = at::empty_like(x, x.options().device(at::kMeta));
    return rotary_rows(x, cos, sin, x_dtype, trig_dtype, /*may_overwrite_x=*/false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "rotary: no double backward (create_graph)");
    variable_list result(3);  // x, then none for cos and sin
    if (!grad_outputs[0].defined() || !ctx->needs_input_grad(0)) return result;
    const variable_list saved = ctx->get_saved_variables();
    result[0] = rotary_grad_rows(grad_outputs[0], saved[0], saved[1], ctx->saved_data["x_layout"].toTensor());
    return result;
  }
};

}  // namespace

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
  return RmsNormNode::apply(x, x, weight, eps);
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
  return RotaryNode::apply(x, cos, sin);
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

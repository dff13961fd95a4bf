// fused_norm_rope.h: when the row loops apply, the ISA choice, and the
// one-time check against the op chains.
#include "fused_norm_rope.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "ftcore/sdk/multi_tensor.h"
#include "../util/same_bits.h"
#include "fused_norm_rope_kernel.h"
#include "records_graph.h"
#include "reusable_in_place.h"

namespace ftcore::model {

namespace {

struct Kernels {
  RmsNormRowsKernel rms_norm;
  RotaryRowsKernel rotary;
};

Kernels generic_kernels() { return {&rms_norm_rows_generic, &rotary_rows_generic}; }
Kernels avx2_kernels() { return {&rms_norm_rows_avx2, &rotary_rows_avx2}; }
Kernels avx512_kernels() { return {&rms_norm_rows_avx512, &rotary_rows_avx512}; }

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

at::Tensor rotary_rows(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RowDtype x_dtype,
                       RowDtype trig_dtype) {
  const at::ScalarType out_type = at::promote_types(x.scalar_type(), cos.scalar_type());
  // Over x when only the caller holds it (the projection's fresh output); else x's layout (dense views keep strides).
  at::Tensor out = out_type == x.scalar_type() && reusable_in_place(x) ? x : at::empty_like(x, x.options().dtype(out_type));
  RotaryRows p{};
  p.x = x.data_ptr();
  p.cos = cos.data_ptr();
  p.sin = sin.data_ptr();
  p.out = out.data_ptr();
  p.dim = x.size(3);
  // Grid (batch, heads, tokens), or (batch, tokens, heads) when x's heads lie closer
  // in memory (the attention's transposed view): rows are then visited as stored.
  const bool heads_inner = x.stride(1) < x.stride(2);
  const int dims[3] = {0, heads_inner ? 2 : 1, heads_inner ? 1 : 2};
  for (int i = 0; i < 3; ++i) {
    p.sizes[i] = x.size(dims[i]);
    p.x_strides[i] = x.stride(dims[i]);
    p.out_strides[i] = out.stride(dims[i]);
    // cos/sin [B or 1, 1, T, D]: no stride along heads, none along a broadcast batch.
    p.trig_strides[i] = dims[i] == 1 || cos.size(dims[i]) == 1 ? 0 : cos.stride(dims[i]);
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
  if (records_graph({x, weight}) || !rms_norm_rows_apply(x, weight, dtype) || !fused_norm_rope_match_aten())
    return rms_norm_aten_chain(x, weight, eps, style);
  return rms_norm_rows(x, weight, eps, style, dtype);
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
  if (records_graph({x, cos, sin}) || !rotary_rows_apply(x, cos, sin, x_dtype, trig_dtype) ||
      !fused_norm_rope_match_aten())
    return rotary_aten_chain(x, cos, sin);
  return rotary_rows(x, cos, sin, x_dtype, trig_dtype);
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
        all = all && same_bits(rotary_rows(x, cos, sin, xd, td), expected);  // over x where the dtypes allow
      }
    }
    if (!all)
      spdlog::warn("RMSNorm/RoPE row loops differ from this libtorch's op chains; the op chains run (slower)");
    return all;
  }();
  return match;
}

}  // namespace ftcore::model

// fused_norm_rope_rows.h: the ISA choice and the row loops' tensor wrappers.
#include "fused_norm_rope_rows.h"

#include <algorithm>
#include <array>

#include <ATen/ATen.h>

#include "ftcore/sdk/multi_tensor.h"
#include "ftcore/sdk/parallel.h"
#include "reusable_in_place.h"

namespace ftcore::model {

namespace {

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

// Rows per parallel chunk: about 16K elements, as ATen's elementwise grain.
int64_t grain_rows(int64_t row_size) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_size)); }

GainOrder gain_order(RmsNormStyle style) {
  switch (style) {
    case RmsNormStyle::fp32_gain: return GainOrder::fp32_gain;
    case RmsNormStyle::unit_offset: return GainOrder::unit_offset;
    default: return GainOrder::after_cast;
  }
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

}  // namespace

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

at::Tensor rms_norm_rows(const at::Tensor& x, const at::Tensor& weight, double eps, RmsNormStyle style,
                         RowDtype dtype) {
  at::Tensor out = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t size = x.size(-1), rows = x.numel() / size;
  const RmsNormRows p{x.data_ptr(), weight.data_ptr(), out.data_ptr(), size, static_cast<float>(eps), dtype,
                      gain_order(style)};
  const RmsNormRowsKernel kernel = chosen_kernels().rms_norm;
  sdk::parallel_for(0, rows, grain_rows(size), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return out;
}

std::vector<at::Tensor> rms_norm_grad_rows(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& grad,
                                           double eps, RowDtype dtype, bool parts) {
  std::vector<at::Tensor> out{at::empty_like(x, at::MemoryFormat::Contiguous)};
  if (parts) out.push_back(at::empty_like(out[0]));
  const int64_t size = x.size(-1), rows = x.numel() / size;
  const RmsNormGradRows p{x.data_ptr(),          weight.data_ptr(), grad.data_ptr(), out[0].data_ptr(),
                          parts ? out[1].data_ptr() : nullptr, size, static_cast<float>(eps), dtype};
  const RmsNormGradRowsKernel kernel = chosen_kernels().rms_norm_grad;
  sdk::parallel_for(0, rows, grain_rows(size), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return out;
}

bool rms_norm_rows_apply(const at::Tensor& x, const at::Tensor& weight, RowDtype& dtype) {
  if (!x.device().is_cpu() || x.dim() == 0 || !x.is_contiguous() || !weight.is_contiguous()) return false;
  if (!row_dtype(x, dtype) || weight.scalar_type() != x.scalar_type()) return false;
  const int64_t size = x.size(-1);
  if (size < 8 || weight.numel() != size || x.numel() == 0) return false;
  return !(x.numel() == size && size >= at::internal::GRAIN_SIZE);
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
  sdk::parallel_for(0, rows, grain_rows(p.dim), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return out;
}

bool rotary_rows_apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, RowDtype& x_dtype,
                       RowDtype& trig_dtype) {
  if (!x.device().is_cpu() || x.dim() != 4 || cos.dim() != 4 || x.numel() == 0) return false;
  if (!row_dtype(x, x_dtype) || !row_dtype(cos, trig_dtype) || sin.scalar_type() != cos.scalar_type()) return false;
  if (cos.sizes() != sin.sizes() || cos.strides() != sin.strides() || cos.size(1) != 1) return false;
  if (cos.size(0) != x.size(0) && cos.size(0) != 1) return false;
  if (cos.size(2) != x.size(2) || cos.size(3) != x.size(3) || x.size(3) % 2 != 0) return false;
  return x.stride(3) == 1 && cos.stride(3) == 1;
}

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
  sdk::parallel_for(0, rows, grain_rows(p.dim), [&](int64_t begin, int64_t end) { kernel(p, begin, end); });
  return grad_x;
}

}  // namespace ftcore::model

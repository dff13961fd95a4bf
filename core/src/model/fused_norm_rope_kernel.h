// The row loops of fused_norm_rope.h, compiled once per ISA
// (fused_norm_rope_kernel_<isa>.cpp; sdk/cpu_isa.h picks one at run time).
// Each loop reproduces, element for element and in the same order of
// operations, the ATen op chain it replaces, so its results are the same bits.
#pragma once

#include <cstdint>

namespace ftcore::model {

// Element types the loops read and write: fp32, or bf16 as its 16 raw bits.
enum class RowDtype : uint8_t { f32, bf16 };

// Where RMSNorm's gain meets the normalised row (ftcore/model_config.h RmsNormStyle):
// weight * h.to(dtype) (llama), (weight.to(f32) * h).to(dtype), (h * (weight.to(f32) + 1)).to(dtype).
enum class GainOrder : uint8_t { after_cast, fp32_gain, unit_offset };

struct RmsNormRows {
  const void* x;       // [rows, size] contiguous, `dtype`
  const void* weight;  // [size], `dtype`
  void* out;           // [rows, size] contiguous, `dtype`
  int64_t size;
  float eps;
  RowDtype dtype;
  GainOrder gain;
};

// The gradient of x through RmsNormRows' op chain with the llama gain order
// and a gain that takes no gradient, as autograd computes it: grad and
// grad_x [rows, size] contiguous, all of `dtype`. With grad_x_squares (fp32
// only), its two parts apart: through h * r into grad_x, through h.pow(2)
// into grad_x_squares.
struct RmsNormGradRows {
  const void* x;
  const void* weight;
  const void* grad;
  void* grad_x;
  void* grad_x_squares;  // may be null
  int64_t size;
  float eps;
  RowDtype dtype;
};

// x * cos + rotate_half(x) * sin over rows of `dim` elements; x's, cos's and
// sin's last dimension contiguous. The rows form a [sizes[0], sizes[1],
// sizes[2]] grid (batch and, in the order their memory runs, heads and tokens),
// row r = (i0 * sizes[1] + i1) * sizes[2] + i2; strides in elements per grid
// index (cos and sin share theirs, 0 along heads).
// out may be x itself (same dtype and strides): written in place.
struct RotaryRows {
  const void* x;
  const void* cos;
  const void* sin;
  void* out;
  int64_t sizes[3];
  int64_t dim;
  int64_t x_strides[3];
  int64_t trig_strides[3];
  int64_t out_strides[3];
  RowDtype x_dtype, trig_dtype, out_dtype;  // out is bf16 only when all three are
};

// The gradient of x through RotaryRows' op chain, as autograd computes it
// (fused_norm_rope.h rotary): grad has the forward result's dtype, grad_x
// x's; the grid and strides as in RotaryRows, grad's strides in place of x's.
struct RotaryGradRows {
  const void* grad;
  const void* cos;
  const void* sin;
  void* grad_x;
  int64_t sizes[3];
  int64_t dim;
  int64_t grad_strides[3];
  int64_t trig_strides[3];
  int64_t grad_x_strides[3];
  RowDtype grad_dtype, trig_dtype, x_dtype;  // grad_dtype: the forward's out_dtype
};

using RmsNormRowsKernel = void (*)(const RmsNormRows&, int64_t row_begin, int64_t row_end);
using RotaryRowsKernel = void (*)(const RotaryRows&, int64_t row_begin, int64_t row_end);
using RotaryGradRowsKernel = void (*)(const RotaryGradRows&, int64_t row_begin, int64_t row_end);
using RmsNormGradRowsKernel = void (*)(const RmsNormGradRows&, int64_t row_begin, int64_t row_end);

void rms_norm_rows_generic(const RmsNormRows&, int64_t, int64_t);
void rms_norm_rows_avx2(const RmsNormRows&, int64_t, int64_t);
void rms_norm_rows_avx512(const RmsNormRows&, int64_t, int64_t);
void rms_norm_grad_rows_generic(const RmsNormGradRows&, int64_t, int64_t);
void rms_norm_grad_rows_avx2(const RmsNormGradRows&, int64_t, int64_t);
void rms_norm_grad_rows_avx512(const RmsNormGradRows&, int64_t, int64_t);
void rotary_rows_generic(const RotaryRows&, int64_t, int64_t);
void rotary_rows_avx2(const RotaryRows&, int64_t, int64_t);
void rotary_rows_avx512(const RotaryRows&, int64_t, int64_t);
void rotary_grad_rows_generic(const RotaryGradRows&, int64_t, int64_t);
void rotary_grad_rows_avx2(const RotaryGradRows&, int64_t, int64_t);
void rotary_grad_rows_avx512(const RotaryGradRows&, int64_t, int64_t);

}  // namespace ftcore::model

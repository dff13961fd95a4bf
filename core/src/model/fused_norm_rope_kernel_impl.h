// fused_norm_rope_kernel.h's loops; fused_norm_rope_kernel_<isa>.cpp defines
// FTCORE_RMS_NORM_ROWS, FTCORE_RMS_NORM_GRAD_ROWS, FTCORE_ROTARY_ROWS and
// FTCORE_ROTARY_GRAD_ROWS (the functions' names) and
// includes this file with its ISA's flags and -ffp-contract=off (a fused
// multiply-add would round once where ATen's separate ops round twice).
// Plain loops over fixed-width lane arrays: GCC vectorises them, and every
// element sees the same IEEE operations in the same order as in ATen.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../util/bf16_bits.h"
#include "fused_norm_rope_kernel.h"

namespace ftcore::model {
namespace {

using util::float_to_bf16;

// Element storage of each RowDtype.
template <RowDtype D>
using Element = std::conditional_t<D == RowDtype::bf16, uint16_t, float>;

// bf16 (its 16 raw bits) or fp32 as fp32: exact.
inline float to_float(uint16_t bf16) { return util::bf16_to_float(bf16); }
inline float to_float(float value) { return value; }

// The value an op with a `D` output leaves: fp32 as computed, bf16 rounded.
template <RowDtype D>
inline float round_to(float value) {
  if constexpr (D == RowDtype::bf16) return to_float(float_to_bf16(value));
  return value;
}

template <RowDtype D>
inline Element<D> from_float(float value) {
  if constexpr (D == RowDtype::bf16) return float_to_bf16(value);
  return value;
}

// at::sum's fp32 inner reduction (ATen/native/cpu/SumKernel.cpp, registered
// for AVX2 and not AVX512, so 8-lane vectors on every x86 CPU libtorch
// vectorises for): the row as 8-lane vectors, those as groups of 4
// accumulated by multi_row_sum's four-level cascade of 16-step chunks, the
// leftover vectors onto group 0, groups 1-3 onto group 0, then a scalar
// running sum of the leftover elements and the 8 lanes.
constexpr int kLanes = 8;
constexpr int kGroups = 4;  // row_sum's ilp_factor
constexpr int kLevels = 4;

struct Lanes {
  float v[kLanes];
};

inline void add_into(Lanes& acc, const Lanes& x) {
  for (int l = 0; l < kLanes; ++l) acc.v[l] += x.v[l];
}

inline Lanes lanes_at(const float* a, int64_t vector) {
  Lanes x;
  std::memcpy(x.v, a + vector * kLanes, sizeof(x.v));
  return x;
}

inline int64_t ceil_log2(int64_t x) {  // at::native::utils::CeilLog2
  if (x <= 2) return 1;
  return 64 - __builtin_clzll(static_cast<uint64_t>(x) - 1);
}

float cascade_sum(const float* a, int64_t n) {
  const int64_t vectors = n / kLanes, groups = vectors / kGroups;
  const int64_t level_power = std::max<int64_t>(4, ceil_log2(groups) / kLevels);
  const int64_t level_step = int64_t{1} << level_power, level_mask = level_step - 1;
  Lanes acc[kLevels][kGroups] = {};
  int64_t i = 0;
  while (i + level_step <= groups) {
    for (int64_t j = 0; j < level_step; ++j, ++i)
      for (int k = 0; k < kGroups; ++k) add_into(acc[0][k], lanes_at(a, i * kGroups + k));
    for (int64_t j = 1; j < kLevels; ++j) {
      for (int k = 0; k < kGroups; ++k) {
        add_into(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = Lanes{};
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < groups; ++i)
    for (int k = 0; k < kGroups; ++k) add_into(acc[0][k], lanes_at(a, i * kGroups + k));
  for (int64_t j = 1; j < kLevels; ++j)
    for (int k = 0; k < kGroups; ++k) add_into(acc[0][k], acc[j][k]);
  Lanes total = acc[0][0];
  for (int64_t v = groups * kGroups; v < vectors; ++v) add_into(total, lanes_at(a, v));
  for (int k = 1; k < kGroups; ++k) add_into(total, acc[0][k]);
  float sum = 0.0f;
  for (int64_t e = vectors * kLanes; e < n; ++e) sum += a[e];
  for (int l = 0; l < kLanes; ++l) sum += total.v[l];
  return sum;
}

// RMSNorm's rows in dtype D (see FTCORE_RMS_NORM_ROWS). Typed local
// pointers: through the parameter struct the compiler could not rule out
// that a store changes a pointer, and would not vectorise.
template <RowDtype D>
void rms_norm_rows(const RmsNormRows& p, int64_t row_begin, int64_t row_end) {
  using E = Element<D>;
  const int64_t n = p.size;
  const float eps = p.eps;
  const bool after_cast = p.gain == GainOrder::after_cast;
  std::vector<float> h(n), squares(n), gain(n);
  float* __restrict__ hs = h.data();
  float* __restrict__ sq = squares.data();
  float* __restrict__ gs = gain.data();
  const E* __restrict__ weight = static_cast<const E*>(p.weight);
  for (int64_t i = 0; i < n; ++i) gs[i] = p.gain == GainOrder::unit_offset ? to_float(weight[i]) + 1.0f : to_float(weight[i]);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const E* __restrict__ x = static_cast<const E*>(p.x) + row * n;
    E* __restrict__ out = static_cast<E*>(p.out) + row * n;
    for (int64_t i = 0; i < n; ++i) {
      hs[i] = to_float(x[i]);
      sq[i] = hs[i] * hs[i];
    }
    const float mean = cascade_sum(sq, n) / static_cast<float>(n);
    const float inverse_rms = 1.0f / std::sqrt(mean + eps);
    if (after_cast) {
      for (int64_t i = 0; i < n; ++i) out[i] = from_float<D>(gs[i] * round_to<D>(hs[i] * inverse_rms));
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = from_float<D>((hs[i] * inverse_rms) * gs[i]);
    }
  }
}

// RMSNorm's gradient rows in dtype D (see FTCORE_RMS_NORM_GRAD_ROWS).
template <RowDtype D>
void rms_norm_grad_rows(const RmsNormGradRows& p, int64_t row_begin, int64_t row_end) {
  using E = Element<D>;
  const int64_t n = p.size;
  const float eps = p.eps;
  std::vector<float> h(n), work(n), through_gain(n), gain(n);
  float* __restrict__ hs = h.data();
  float* __restrict__ ws = work.data();  // the squares, then the products summed for rsqrt's gradient
  float* __restrict__ gs = through_gain.data();
  float* __restrict__ weights = gain.data();
  const E* __restrict__ weight = static_cast<const E*>(p.weight);
  float* __restrict__ squares_part = static_cast<float*>(p.grad_x_squares);  // fp32 only
  for (int64_t i = 0; i < n; ++i) weights[i] = to_float(weight[i]);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const E* __restrict__ x = static_cast<const E*>(p.x) + row * n;
    const E* __restrict__ grad = static_cast<const E*>(p.grad) + row * n;
    E* __restrict__ grad_x = static_cast<E*>(p.grad_x) + row * n;
    // The forward's statistic, recomputed as rms_norm_rows computes it.
    for (int64_t i = 0; i < n; ++i) {
      hs[i] = to_float(x[i]);
      ws[i] = hs[i] * hs[i];
    }
    const float inverse_rms = 1.0f / std::sqrt(cascade_sum(ws, n) / static_cast<float>(n) + eps);
    // weight * normed: grad * weight in D, then ToCopy's widening.
    for (int64_t i = 0; i < n; ++i) {
      gs[i] = round_to<D>(to_float(grad[i]) * weights[i]);
      ws[i] = gs[i] * hs[i];
    }
    // h * r: r's gradient is the row sum of grad * h (sum_to_size, at::sum's order);
    // rsqrt's: -0.5 * grad * r.pow(3); mean's: / n; pow(2)'s: grad * (2 * h).
    const float rsqrt_grad = (-0.5f * cascade_sum(ws, n)) * (inverse_rms * inverse_rms * inverse_rms);
    const float per_square = rsqrt_grad / static_cast<float>(n);
    if (squares_part) {  // fp32: the two parts, for autograd to add into x's buffer
      for (int64_t i = 0; i < n; ++i) {
        grad_x[i] = from_float<D>(gs[i] * inverse_rms);
        squares_part[row * n + i] = per_square * (2.0f * hs[i]);
      }
      continue;
    }
    // h's two gradients summed, then ToCopy's cast back to D.
    for (int64_t i = 0; i < n; ++i) grad_x[i] = from_float<D>(gs[i] * inverse_rms + per_square * (2.0f * hs[i]));
  }
}

// A row's place in RotaryRows' [sizes[0], sizes[1], sizes[2]] grid, stepped
// along from row to row without divisions.
class GridIndex {
 public:
  GridIndex(const int64_t (&sizes)[3], int64_t row) : sizes_(sizes) {
    i_[2] = row % sizes[2];
    i_[1] = (row / sizes[2]) % sizes[1];
    i_[0] = row / (sizes[2] * sizes[1]);
  }
  int64_t offset(const int64_t (&strides)[3]) const { return i_[0] * strides[0] + i_[1] * strides[1] + i_[2] * strides[2]; }
  void next() {
    if (++i_[2] < sizes_[2]) return;
    i_[2] = 0;
    if (++i_[1] < sizes_[1]) return;
    i_[1] = 0;
    ++i_[0];
  }

 private:
  const int64_t (&sizes_)[3];
  int64_t i_[3];
};

// Rotary rows with x in X, cos/sin in T and the result in O (see FTCORE_ROTARY_ROWS).
// Each row of x is first read into a buffer, so out may be x (in place) and the
// pair loop still vectorises (its pointers cannot alias).
template <RowDtype X, RowDtype T, RowDtype O>
void rotary_rows(const RotaryRows& p, int64_t row_begin, int64_t row_end) {
  const int64_t half = p.dim / 2;
  std::vector<float> row_values(p.dim);
  float* __restrict__ xs = row_values.data();
  GridIndex at(p.sizes, row_begin);
  for (int64_t row = row_begin; row < row_end; ++row, at.next()) {
    const Element<X>* x = static_cast<const Element<X>*>(p.x) + at.offset(p.x_strides);  // may be out's memory
    for (int64_t d = 0; d < 2 * half; ++d) xs[d] = to_float(x[d]);
    const int64_t trig0 = at.offset(p.trig_strides);
    const Element<T>* __restrict__ cos = static_cast<const Element<T>*>(p.cos) + trig0;
    const Element<T>* __restrict__ sin = static_cast<const Element<T>*>(p.sin) + trig0;
    Element<O>* __restrict__ out = static_cast<Element<O>*>(p.out) + at.offset(p.out_strides);
    for (int64_t d = 0; d < half; ++d) {
      const float straight = round_to<O>(xs[d] * to_float(cos[d]));
      const float rotated = round_to<O>(-xs[d + half] * to_float(sin[d]));
      out[d] = from_float<O>(straight + rotated);
    }
    for (int64_t d = half; d < 2 * half; ++d) {
      const float straight = round_to<O>(xs[d] * to_float(cos[d]));
      const float rotated = round_to<O>(xs[d - half] * to_float(sin[d]));
      out[d] = from_float<O>(straight + rotated);
    }
  }
}

// The gradient rows with the incoming gradient in G, cos/sin in T and x in X
// (see FTCORE_ROTARY_GRAD_ROWS).
template <RowDtype G, RowDtype T, RowDtype X>
void rotary_grad_rows(const RotaryGradRows& p, int64_t row_begin, int64_t row_end) {
  const int64_t half = p.dim / 2;
  std::vector<float> row_products(p.dim);
  float* __restrict__ through_sin = row_products.data();
  GridIndex at(p.sizes, row_begin);
  for (int64_t row = row_begin; row < row_end; ++row, at.next()) {
    const Element<G>* __restrict__ grad = static_cast<const Element<G>*>(p.grad) + at.offset(p.grad_strides);
    const int64_t trig0 = at.offset(p.trig_strides);
    const Element<T>* __restrict__ cos = static_cast<const Element<T>*>(p.cos) + trig0;
    const Element<T>* __restrict__ sin = static_cast<const Element<T>*>(p.sin) + trig0;
    Element<X>* __restrict__ grad_x = static_cast<Element<X>*>(p.grad_x) + at.offset(p.grad_x_strides);
    for (int64_t d = 0; d < 2 * half; ++d) through_sin[d] = round_to<X>(round_to<G>(to_float(grad[d]) * to_float(sin[d])));
    // "+ 0.0f": the slices' zero-filled gradients autograd adds turn a -0 sum into +0.
    for (int64_t d = 0; d < half; ++d) {
      const float straight = round_to<X>(round_to<G>(to_float(grad[d]) * to_float(cos[d])));
      grad_x[d] = from_float<X>(round_to<X>(straight + through_sin[d + half]) + 0.0f);
    }
    for (int64_t d = half; d < 2 * half; ++d) {
      const float straight = round_to<X>(round_to<G>(to_float(grad[d]) * to_float(cos[d])));
      grad_x[d] = from_float<X>(round_to<X>(straight + -through_sin[d - half]) + 0.0f);
    }
  }
}

}  // namespace

// h = x.to(f32); h * rsqrt(h.pow(2).mean(-1) + eps) (mean = sum / size), then the gain.
void FTCORE_RMS_NORM_ROWS(const RmsNormRows& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == RowDtype::bf16)
    rms_norm_rows<RowDtype::bf16>(p, row_begin, row_end);
  else
    rms_norm_rows<RowDtype::f32>(p, row_begin, row_end);
}

// Autograd's gradient of x through rms_norm_aten_chain's llama gain order,
// h = x.to(f32); r = rsqrt(h.pow(2).mean(-1) + eps); out = weight * (h * r).to(D),
// the gain taking no gradient: every backward formula's ops in their order,
// the row sum in at::sum's order.
void FTCORE_RMS_NORM_GRAD_ROWS(const RmsNormGradRows& p, int64_t row_begin, int64_t row_end) {
  if (p.dtype == RowDtype::bf16)
    rms_norm_grad_rows<RowDtype::bf16>(p, row_begin, row_end);
  else
    rms_norm_grad_rows<RowDtype::f32>(p, row_begin, row_end);
}

// out = x * cos + rotate_half(x) * sin, each op's result in out's dtype:
// rotate_half(x)[d] = -x[d + dim/2] for d < dim/2, x[d - dim/2] after (negation is exact).
// Type promotion as ATen's: out is bf16 only when x, cos and sin are.
void FTCORE_ROTARY_ROWS(const RotaryRows& p, int64_t row_begin, int64_t row_end) {
  constexpr RowDtype f32 = RowDtype::f32, bf16 = RowDtype::bf16;
  if (p.out_dtype == bf16) return rotary_rows<bf16, bf16, bf16>(p, row_begin, row_end);
  if (p.x_dtype == bf16) return rotary_rows<bf16, f32, f32>(p, row_begin, row_end);
  if (p.trig_dtype == bf16) return rotary_rows<f32, bf16, f32>(p, row_begin, row_end);
  rotary_rows<f32, f32, f32>(p, row_begin, row_end);
}

// Autograd's gradient of x through out = x * cos + rotate_half(x) * sin:
// each product's backward, grad * cos and grad * sin in grad's dtype, cast
// to x's; the sin product's halves swapped, the first negated (cat's, neg's
// and the slices' backward); the two summed in x's dtype, as autograd's
// input buffer sums them. grad is bf16 only when x, cos and sin are.
void FTCORE_ROTARY_GRAD_ROWS(const RotaryGradRows& p, int64_t row_begin, int64_t row_end) {
  constexpr RowDtype f32 = RowDtype::f32, bf16 = RowDtype::bf16;
  if (p.grad_dtype == bf16) return rotary_grad_rows<bf16, bf16, bf16>(p, row_begin, row_end);
  if (p.x_dtype == bf16) return rotary_grad_rows<f32, f32, bf16>(p, row_begin, row_end);
  if (p.trig_dtype == bf16) return rotary_grad_rows<f32, bf16, f32>(p, row_begin, row_end);
  rotary_grad_rows<f32, f32, f32>(p, row_begin, row_end);
}

}  // namespace ftcore::model

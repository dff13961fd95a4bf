// The 8-bit Adam/Lion element loops, compiled once per ISA:
// optim8bit_kernel_<isa>.cpp defines FTCORE_KERNEL_FACTORY and includes this
// file with -mavx2/-mavx512f set on that file only. No fast-math and no FMA
// contraction (-ffp-contract=off): every fp32 operation rounds where ATen's
// does in bitsandbytes' kernels, and the fused multiply-adds written out are
// the ones ATen's add(alpha) and addcmul use. The update rules are in optim8bit_kernel.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "blockwise8.h"
#include "optim8bit_kernel.h"

namespace ftcore::plugins::blockwise8 {
namespace {

#include "quantize_element.h"

// Largest |x| of a block. Sixteen running maxima in a GCC vector (the
// compiler keeps a std::max reduction scalar): max is exact and order-free,
// and each lane's acc < |x| ? |x| : acc is std::max(acc, |x|), NaN skipped.
inline float block_absmax(const float* __restrict x, int64_t len) {
  typedef float f32x16 __attribute__((vector_size(64)));
  typedef int32_t i32x16 __attribute__((vector_size(64)));
  f32x16 acc = {};
  int64_t j = 0;
  for (; j + 16 <= len; j += 16) {
    f32x16 a;
    std::memcpy(&a, x + j, sizeof a);
    a = reinterpret_cast<f32x16>(reinterpret_cast<i32x16>(a) & 0x7fffffff);  // fabs
    acc = acc < a ? a : acc;
  }
  // No lane holds a NaN, so halving the vector with the same select is exact.
  typedef float f32x8 __attribute__((vector_size(32)));
  typedef float f32x4 __attribute__((vector_size(16)));
  const f32x8 lo8 = __builtin_shufflevector(acc, acc, 0, 1, 2, 3, 4, 5, 6, 7);
  const f32x8 hi8 = __builtin_shufflevector(acc, acc, 8, 9, 10, 11, 12, 13, 14, 15);
  const f32x8 m8 = lo8 < hi8 ? hi8 : lo8;
  const f32x4 lo4 = __builtin_shufflevector(m8, m8, 0, 1, 2, 3), hi4 = __builtin_shufflevector(m8, m8, 4, 5, 6, 7);
  const f32x4 m4 = lo4 < hi4 ? hi4 : lo4;
  float amax = std::max(std::max(m4[0], m4[1]), std::max(m4[2], m4[3]));
  for (; j < len; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

#if defined(__AVX512BW__)
#include "code_search_avx512.h"
using Codec = VectorCodec;
#else
// One map's table lookups, scalar: the reference rule of blockwise8.h.
struct ScalarCodec {
  explicit ScalarCodec(const QuantMap& map) : map_(map) {}
  void dequantize(const uint8_t* __restrict q, int64_t len, float absmax, float* __restrict out) const {
    for (int64_t j = 0; j < len; ++j) out[j] = map_.code[q[j]] * absmax;
  }
  // The grid points are computed in a vector loop, the table lookups (bytes,
  // which no x86 gather loads) in a scalar one.
  void requantize(const float* __restrict x, int64_t len, float inv, uint8_t* __restrict codes) const {
    alignas(64) int32_t grid[kStateBlock];
    for (int64_t j = 0; j < len; ++j) grid[j] = grid_point(x[j], inv);
    for (int64_t j = 0; j < len; ++j) codes[j] = map_.lut[static_cast<uint16_t>(grid[j])];
  }
  const QuantMap& map_;
};
using Codec = ScalarCodec;
#endif

// Codes of n elements of a block whose new absmax is known.
inline void requantize_slice(const Codec& codec, const float* x, int64_t n, float absmax, uint8_t* codes) {
  if (absmax == 0.0f) std::memset(codes, 0, static_cast<size_t>(n));
  else codec.requantize(x, n, 1.0f / absmax, codes);
}

// Requantizes one block (len <= 256) of fp32 state: new absmax, then codes.
inline void requantize_block(const float* __restrict x, int64_t len, const Codec& codec, uint8_t* __restrict codes,
                             float* __restrict absmax) {
  *absmax = block_absmax(x, len);
  requantize_slice(codec, x, len, *absmax, codes);
}

// Whole states in blocks of 256, for the tests of each ISA's codec.
void quantize_state(const float* x, int64_t numel, bool is_signed, uint8_t* codes, float* absmax) {
  const Codec codec(quant_map(is_signed));
  for (int64_t b0 = 0; b0 < numel; b0 += kStateBlock)
    requantize_block(x + b0, std::min(kStateBlock, numel - b0), codec, codes + b0, absmax + b0 / kStateBlock);
}

void dequantize_state(const uint8_t* codes, const float* absmax, int64_t numel, bool is_signed, float* out) {
  const Codec codec(quant_map(is_signed));
  for (int64_t b0 = 0; b0 < numel; b0 += kStateBlock)
    codec.dequantize(codes + b0, std::min(kStateBlock, numel - b0), absmax[b0 / kStateBlock], out + b0);
}

// Asks for a later block's parameter and gradient while this block computes:
// the step alternates long register-bound stretches (the codecs) with short
// streams, and the hardware prefetcher alone leaves the streams waiting.
template <typename T>
inline void prefetch_block(const T* p, const T* g, bool in_range) {
  if (!in_range) return;
  constexpr int64_t kLine = 64 / sizeof(T);
  for (int64_t j = 0; j < kStateBlock; j += kLine) {
    __builtin_prefetch(p + j, 1, 3);
    __builtin_prefetch(g + j, 0, 3);
  }
}

inline float sign_of(float c) { return static_cast<float>((c > 0.0f) - (c < 0.0f)); }

// One block's fp32 state between its update and its requantization.
struct AdamBlock {
  alignas(64) float m[kStateBlock];
  alignas(64) float v[kStateBlock];
  int64_t start = 0, len = 0;  // the block's elements [start, start + len); len 0: none
};

// Elements of a block per step of the pipeline in adam_chunk: one round of
// four searches in the AVX-512 codec (64-element slices, two searches a
// round, measured slower: their chains wait on each other).
inline constexpr int64_t kAdamSlice = 128;

// The 8-bit Adam update of n elements whose state was dequantized into m, v.
template <typename T>
inline void adam_update(const Adam8bitScalars& s, const T* __restrict g, T* __restrict p, float* __restrict m,
                        float* __restrict v, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    const float gi = static_cast<float>(g[j]) * s.gnorm_scale;
    const float mi = std::fma(gi, s.one_minus_beta1, m[j] * s.beta1);
    // ATen's addcmul is one fused multiply-add: fma(value * g, g, v).
    const float vi = std::fma(s.one_minus_beta2 * gi, gi, v[j] * s.beta2);
    m[j] = mi;
    v[j] = vi;
    const float denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    p[j] = static_cast<T>(static_cast<float>(p[j]) * s.decay + s.neg_lr_over_bc1 * mi / denom);
  }
}

// Dequantizes n elements of block `cur` from slice offset j (the block's old absmax).
inline void dequantize_slice(const Codec& codec1, const Codec& codec2, const Adam8bitTensor& t, AdamBlock& cur,
                             int64_t j, int64_t n) {
  const int64_t at = cur.start + j, blk = cur.start / kStateBlock;
  codec1.dequantize(t.state1 + at, n, t.absmax1[blk], cur.m + j);
  codec2.dequantize(t.state2 + at, n, t.absmax2[blk], cur.v + j);
}

#if defined(__AVX512BW__)
// One full slice of both blocks as in adam_chunk, with the update of cur's
// slice cut into 16-element groups, one issued before the first step of
// prev's two searches and one after each step
// (VectorCodec::requantize_two_rounds): the divider (the update) and the
// shuffle port (the searches) then work side by side, where a whole slice of
// each in turn left one idle. Needs both of prev's absmax reciprocals normal
// (no clamp, (1') in code_search_avx512.h; an absmax of 0 gives an infinite
// one); returns false without touching anything otherwise.
template <typename T>
inline bool interleave_update(const Codec& codec1, const Codec& codec2, const Adam8bitTensor& t,
                              const Adam8bitScalars& s, const AdamBlock& prev, AdamBlock& cur, int64_t j) {
  const int64_t prev_blk = prev.start / kStateBlock;
  const float inv1 = 1.0f / t.absmax1[prev_blk], inv2 = 1.0f / t.absmax2[prev_blk];
  if (!std::isnormal(inv1) || !std::isnormal(inv2)) return false;
  constexpr int64_t kGroup = kAdamSlice / VectorCodec::kBetweenCalls;
  static_assert(kAdamSlice == VectorCodec::kTwoRoundsElements && kGroup * VectorCodec::kBetweenCalls == kAdamSlice,
                "requantize_two_rounds' slice and calls must cover the update's slice");
  dequantize_slice(codec1, codec2, t, cur, j, kAdamSlice);
  T* p = static_cast<T*>(t.param) + cur.start + j;
  const T* g = static_cast<const T*>(t.grad) + cur.start + j;
  VectorCodec::requantize_two_rounds(codec1, prev.m + j, inv1, t.state1 + prev.start + j, codec2, prev.v + j, inv2,
                                     t.state2 + prev.start + j, [&]<int G>(std::integral_constant<int, G>) {
                                       constexpr int64_t o = kGroup * G;
                                       adam_update(s, g + o, p + o, cur.m + j + o, cur.v + j + o, kGroup);
                                     });
  return true;
}
#endif

// Two blocks in flight: each slice of block b - 1 (whose new absmax is known)
// is requantized, then the same slice of block b is dequantized and updated,
// in one loop. The update waits on the divider (two divisions and a square
// root per element), the codecs on the shuffle port. With AVX-512 a full
// slice goes to interleave_update, which issues the two in alternation
// (docs/benchmarks.md, stop 33); otherwise the slice's phases follow each
// other and overlap only within one instruction window (stop 28). Same
// operations on the same values as block by block.
template <typename T>
void adam_chunk(const Adam8bitTensor& t, int64_t begin, int64_t end) {
  T* __restrict p = static_cast<T*>(t.param);
  const T* __restrict g = static_cast<const T*>(t.grad);
  const Adam8bitScalars s = t.scalars;
  if (!t.state1) {  // fp32 state: bitsandbytes' 32-bit kernel
    float* __restrict m = t.exp_avg32;
    float* __restrict v = t.exp_avg_sq32;
    for (int64_t i = begin; i < end; ++i) {
      const float gi = static_cast<float>(g[i]) * s.gnorm_scale;
      const float mi = std::fma(gi, s.one_minus_beta1, m[i] * s.beta1);
      const float vi = std::fma(s.one_minus_beta2 * gi, gi, v[i] * s.beta2);
      m[i] = mi;
      v[i] = vi;
      const float update = mi / (std::sqrt(vi) + s.eps_bc2);
      p[i] = static_cast<T>(std::fma(update, s.step_size32, static_cast<float>(p[i]) * s.decay));
    }
    return;
  }
  const Codec codec1(signed_quant_map()), codec2(unsigned_quant_map());
  AdamBlock blocks[2];
  AdamBlock* cur = &blocks[0];
  AdamBlock* prev = &blocks[1];
  const auto requantize_prev = [&](int64_t j) {
    const int64_t n = std::min(kAdamSlice, prev->len - j), at = prev->start + j, blk = prev->start / kStateBlock;
    requantize_slice(codec1, prev->m + j, n, t.absmax1[blk], t.state1 + at);
    requantize_slice(codec2, prev->v + j, n, t.absmax2[blk], t.state2 + at);
  };
  for (int64_t b0 = begin; b0 < end; b0 += kStateBlock) {
    const int64_t len = std::min(kStateBlock, end - b0);
    const int64_t blk = b0 / kStateBlock;
    prefetch_block(p + b0 + 2 * kStateBlock, g + b0 + 2 * kStateBlock, b0 + 2 * kStateBlock < end);
    cur->start = b0;
    cur->len = len;
    for (int64_t j = 0; j < std::max(len, prev->len); j += kAdamSlice) {
#if defined(__AVX512BW__)
      if (j + kAdamSlice <= std::min(len, prev->len) && interleave_update<T>(codec1, codec2, t, s, *prev, *cur, j)) continue;
#endif
      if (j < prev->len) requantize_prev(j);
      if (j < len) {
        // Dequantize first, then update in a loop of float arithmetic only (it vectorizes).
        const int64_t n = std::min(kAdamSlice, len - j);
        dequantize_slice(codec1, codec2, t, *cur, j, n);
        adam_update(s, g + b0 + j, p + b0 + j, cur->m + j, cur->v + j, n);
      }
    }
    t.absmax1[blk] = block_absmax(cur->m, len);
    t.absmax2[blk] = block_absmax(cur->v, len);
    std::swap(cur, prev);
  }
  for (int64_t j = 0; j < prev->len; j += kAdamSlice) requantize_prev(j);
}

template <typename T>
void lion_chunk(const Lion8bitTensor& t, int64_t begin, int64_t end) {
  T* __restrict p = static_cast<T*>(t.param);
  const T* __restrict g = static_cast<const T*>(t.grad);
  const Lion8bitScalars s = t.scalars;
  if (!t.state1) {  // fp32 state: bitsandbytes' 32-bit kernel
    float* __restrict m = t.exp_avg32;
    for (int64_t i = begin; i < end; ++i) {
      const float gi = static_cast<float>(g[i]) * s.gnorm_scale;
      const float mi = m[i];
      const float c = std::fma(gi, s.one_minus_beta1, mi * s.beta1);
      p[i] = static_cast<T>(std::fma(sign_of(c), s.neg_lr, static_cast<float>(p[i]) * s.decay));
      m[i] = std::fma(gi, s.one_minus_beta2, mi * s.beta2);
    }
    return;
  }
  const Codec codec1(signed_quant_map());
  alignas(64) float m[kStateBlock];
  for (int64_t b0 = begin; b0 < end; b0 += kStateBlock) {
    const int64_t len = std::min(kStateBlock, end - b0);
    const int64_t blk = b0 / kStateBlock;
    const float a1 = t.absmax1[blk];
    const uint8_t* __restrict q1 = t.state1 + b0;
    T* __restrict pb = p + b0;
    const T* __restrict gb = g + b0;
    prefetch_block(pb + 2 * kStateBlock, gb + 2 * kStateBlock, b0 + 2 * kStateBlock < end);
    codec1.dequantize(q1, len, a1, m);
    for (int64_t j = 0; j < len; ++j) {
      const float gi = static_cast<float>(gb[j]) * s.gnorm_scale;
      const float mi = m[j];
      const float c = mi * s.beta1 + gi * s.one_minus_beta1;
      pb[j] = static_cast<T>(std::fma(sign_of(c), s.neg_lr, static_cast<float>(pb[j]) * s.decay));
      m[j] = std::fma(gi, s.one_minus_beta2, mi * s.beta2);
    }
    requantize_block(m, len, codec1, t.state1 + b0, t.absmax1 + blk);
  }
}

}  // namespace

Optim8bitKernels FTCORE_KERNEL_FACTORY() {
  return {{&adam_chunk<float>, &adam_chunk<c10::BFloat16>, &adam_chunk<c10::Half>},
          {&lion_chunk<float>, &lion_chunk<c10::BFloat16>, &lion_chunk<c10::Half>},
          &quantize_state,
          &dequantize_state};
}

}  // namespace ftcore::plugins::blockwise8

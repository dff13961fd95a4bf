// The dequantization loop, compiled once per ISA: dequant_kernel_<isa>.cpp
// defines FTCORE_DEQUANT_KERNELS and FTCORE_DEQUANT_ISA and includes this
// file, with -mavx2 / -mavx512bw set on that file only.
//
// Per block, the 16 outputs code[k] * absmax are computed in fp32 and
// rounded to the output type; elements are lookups in that table: AVX-512
// permutes 32 (16-bit) or 16 (fp32) lanes per instruction, AVX2 uses byte
// shuffles and 8-lane permutes, the generic loop indexes the table.
// A vector of 32 elements starting at a multiple of 32 never straddles a
// block (block sizes are multiples of 32).
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "dequant_kernel.h"

namespace ftcore::plugins::bnb4bit {
namespace {

inline uint16_t bits_of(float v, OutType t) {
  if (t == OutType::BF16) return c10::BFloat16(v).x;  // round to nearest even, NaN kept
  return c10::Half(v).x;
}

// The 16 outputs of one block, as fp32 and as 16-bit patterns.
struct BlockTable {
  alignas(64) float f32[16];
  alignas(64) uint16_t u16[32];  // 16 used; 32 so one 512-bit load fills a permute table
};

inline void make_table(const DequantArgs& a, int64_t block, BlockTable& t) {
  const float s = a.absmax[block];
  for (int k = 0; k < 16; ++k) {
    t.f32[k] = a.code[k] * s;
    if (a.out_type != OutType::F32) t.u16[k] = bits_of(t.f32[k], a.out_type);
  }
  for (int k = 16; k < 32; ++k) t.u16[k] = 0;
}

inline uint8_t nibble(const uint8_t* packed, int64_t e) {
  const uint8_t b = packed[e >> 1];
  return (e & 1) ? (b & 0x0F) : (b >> 4);
}

// Elements [begin, end) of one block, scalar.
inline void scalar_span(const DequantArgs& a, const BlockTable& t, int64_t begin, int64_t end, void* out,
                        int64_t out_offset) {
  if (a.out_type == OutType::F32) {
    float* o = static_cast<float*>(out) + out_offset;
    for (int64_t e = begin; e < end; ++e) *o++ = t.f32[nibble(a.packed, e)];
  } else {
    uint16_t* o = static_cast<uint16_t*>(out) + out_offset;
    for (int64_t e = begin; e < end; ++e) *o++ = t.u16[nibble(a.packed, e)];
  }
}

#if defined(__AVX2__) || defined(__AVX512F__)
// 16 packed bytes -> 32 nibbles in element order, as two 16-byte vectors.
inline void unpack_nibbles(const uint8_t* p, __m128i& first, __m128i& second) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), mask);
  const __m128i lo = _mm_and_si128(b, mask);
  first = _mm_unpacklo_epi8(hi, lo);
  second = _mm_unpackhi_epi8(hi, lo);
}
#endif

// 32 elements starting at element e (e % 32 == 0), all in one block.
inline void vector32(const DequantArgs& a, const BlockTable& t, int64_t e, void* out, int64_t out_offset) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
  __m128i n0, n1;
  unpack_nibbles(a.packed + (e >> 1), n0, n1);
  if (a.out_type == OutType::F32) {
    const __m512 tbl = _mm512_load_ps(t.f32);
    float* o = static_cast<float*>(out) + out_offset;
    _mm512_storeu_ps(o, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(n0), tbl));
    _mm512_storeu_ps(o + 16, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(n1), tbl));
  } else {
    const __m512i tbl = _mm512_load_si512(t.u16);
    const __m512i idx = _mm512_cvtepu8_epi16(_mm256_set_m128i(n1, n0));
    _mm512_storeu_si512(static_cast<uint16_t*>(out) + out_offset, _mm512_permutexvar_epi16(idx, tbl));
  }
#elif defined(__AVX2__)
  __m128i n0, n1;
  unpack_nibbles(a.packed + (e >> 1), n0, n1);
  if (a.out_type == OutType::F32) {
    const __m256 lo = _mm256_load_ps(t.f32), hi = _mm256_load_ps(t.f32 + 8);
    float* o = static_cast<float*>(out) + out_offset;
    const __m128i parts[4] = {n0, _mm_srli_si128(n0, 8), n1, _mm_srli_si128(n1, 8)};
    for (int q = 0; q < 4; ++q) {
      const __m256i idx = _mm256_cvtepu8_epi32(parts[q]);
      const __m256 from_lo = _mm256_permutevar8x32_ps(lo, idx);
      const __m256 from_hi = _mm256_permutevar8x32_ps(hi, idx);
      // Bit 3 of the code picks the upper half of the table.
      const __m256 pick_hi = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
      _mm256_storeu_ps(o + 8 * q, _mm256_blendv_ps(from_lo, from_hi, pick_hi));
    }
  } else {
    // Low and high bytes of the 16 table entries, looked up with byte shuffles.
    alignas(16) uint8_t lob[16], hib[16];
    for (int k = 0; k < 16; ++k) {
      lob[k] = static_cast<uint8_t>(t.u16[k] & 0xFF);
      hib[k] = static_cast<uint8_t>(t.u16[k] >> 8);
    }
    const __m128i tl = _mm_load_si128(reinterpret_cast<const __m128i*>(lob));
    const __m128i th = _mm_load_si128(reinterpret_cast<const __m128i*>(hib));
    __m128i* o = reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + out_offset);
    const __m128i ns[2] = {n0, n1};
    for (int q = 0; q < 2; ++q) {
      const __m128i l = _mm_shuffle_epi8(tl, ns[q]);
      const __m128i h = _mm_shuffle_epi8(th, ns[q]);
      _mm_storeu_si128(o + 2 * q, _mm_unpacklo_epi8(l, h));
      _mm_storeu_si128(o + 2 * q + 1, _mm_unpackhi_epi8(l, h));
    }
  }
#else
  if (a.out_type == OutType::F32) {
    float* o = static_cast<float*>(out) + out_offset;
    const uint8_t* p = a.packed + (e >> 1);
    for (int j = 0; j < 16; ++j) {
      o[2 * j] = t.f32[p[j] >> 4];
      o[2 * j + 1] = t.f32[p[j] & 0x0F];
    }
  } else {
    uint16_t* o = static_cast<uint16_t*>(out) + out_offset;
    const uint8_t* p = a.packed + (e >> 1);
    for (int j = 0; j < 16; ++j) {
      o[2 * j] = t.u16[p[j] >> 4];
      o[2 * j + 1] = t.u16[p[j] & 0x0F];
    }
  }
#endif
}

void dequant_range(const DequantArgs& a, int64_t begin, int64_t end, void* out) {
  BlockTable t;
  int64_t e = begin;
  while (e < end) {
    const int64_t block = e / a.blocksize;
    const int64_t block_end = std::min(end, (block + 1) * a.blocksize);
    make_table(a, block, t);
    // Scalar head up to a multiple of 32, vectors, scalar tail.
    int64_t v = std::min(block_end, (e + 31) / 32 * 32);
    scalar_span(a, t, e, v, out, e - begin);
    for (; v + 32 <= block_end; v += 32) vector32(a, t, v, out, v - begin);
    scalar_span(a, t, v, block_end, out, v - begin);
    e = block_end;
  }
}

}  // namespace

extern const DequantKernels FTCORE_DEQUANT_KERNELS = {&dequant_range, FTCORE_DEQUANT_ISA};

}  // namespace ftcore::plugins::bnb4bit

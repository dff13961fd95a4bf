// The dequantization loop, compiled once per ISA: dequant_kernel_<isa>.cpp
// defines FTCORE_DEQUANT_KERNELS and FTCORE_DEQUANT_ISA and includes this
// file, with -mavx2 / -mavx512bw set on that file only.
//
// Per block: its absmax (decoded from the nested codes when double-quantized,
// walking the nested blocks with counters, no divisions), then the 16 outputs
// code[k] * absmax in fp32, rounded to the output type, held in registers.
// Elements are lookups in that table:
//   AVX-512: 16 packed bytes are widened to 16 dwords d and turned into 32
//     word indices in element order, (d >> 4) | (d & 15) << 16; one vpermw
//     looks up 32 bf16/fp16 outputs (two vpermps for fp32). The bf16 table
//     stays in dwords (each value in the low word) and the indices are
//     doubled, which saves narrowing the table.
//   AVX2: pshufb over the table's low and high bytes, or two vpermps + blend.
//   generic: indexing.
// bf16 rounding is done on the bits (nearest even, NaN -> 0x7FC0, as
// c10::BFloat16; AVX-512 BF16's vcvtneps2bf16 flushes denormals, which
// bitsandbytes does not). fp16 uses c10::Half's rule (F16C where the file
// has it). A vector of 32 elements starting at a multiple of 32 never
// straddles a block (block sizes are multiples of 32).
//
// `stream` (outputs far larger than the caches): the vector stores are
// non-temporal when the destination of the first vector is 64-byte aligned,
// which saves the read-for-ownership of every output line.
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "dequant_kernel.h"

namespace ftcore::plugins::bnb4bit {
namespace {

// The absmax of consecutive blocks, starting at `block`.
class BlockScales {
 public:
  BlockScales(const DequantArgs& a, int64_t block) : a_(a), block_(block) {
    if (!a.absmax) {
      nested_ = block / a.nested_blocksize;
      rem_ = block % a.nested_blocksize;
    }
  }
  float next() {
    if (a_.absmax) return a_.absmax[block_++];
    // Two fp32 roundings (no FMA: -ffp-contract=off), as bitsandbytes.
    const float scaled = a_.nested_code[a_.absmax_codes[block_++]] * a_.nested_absmax[nested_];
    if (++rem_ == a_.nested_blocksize) {
      rem_ = 0;
      ++nested_;
    }
    return scaled + a_.offset;
  }

 private:
  const DequantArgs& a_;
  int64_t block_;
  int64_t nested_ = 0, rem_ = 0;
};

// One block's 16 outputs in memory, for the scalar head and tail of a range.
struct TableArrays {
  alignas(64) float f32[16];
  alignas(64) uint16_t u16[16];
};

inline uint8_t nibble(const uint8_t* packed, int64_t e) {
  const uint8_t b = packed[e >> 1];
  return (e & 1) ? (b & 0x0F) : (b >> 4);
}

// Elements [begin, end) of one block, scalar, to o (the element `begin`).
template <OutType T>
inline void scalar_span(const DequantArgs& a, const TableArrays& t, int64_t begin, int64_t end, char* o) {
  if constexpr (T == OutType::F32) {
    float* f = reinterpret_cast<float*>(o);
    for (int64_t e = begin; e < end; ++e) *f++ = t.f32[nibble(a.packed, e)];
  } else {
    uint16_t* u = reinterpret_cast<uint16_t*>(o);
    for (int64_t e = begin; e < end; ++e) *u++ = t.u16[nibble(a.packed, e)];
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)

// fp32 -> bf16 bits, nearest even, NaN -> 0x7FC0 (c10::BFloat16's rule), in
// the low word of each of the 16 dwords.
inline __m512i bf16_bits32(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  return _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(0x7FC0));
}

struct Table {
  __m512 f32;  // 16 fp32 outputs
  __m512i w;   // bf16: 16 dwords, value in the low word; fp16: 16 words in the low 256 bits
};

template <OutType T>
inline Table make_table(const __m512 code, float s) {
  Table t;
  t.f32 = _mm512_mul_ps(code, _mm512_set1_ps(s));
  if constexpr (T == OutType::BF16) t.w = bf16_bits32(t.f32);
  else if constexpr (T == OutType::F16)
    t.w = _mm512_zextsi256_si512(_mm512_cvtps_ph(t.f32, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  else t.w = _mm512_setzero_si512();
  return t;
}

template <OutType T>
inline void to_arrays(const Table& t, TableArrays& m) {
  _mm512_store_ps(m.f32, t.f32);
  const __m256i w = T == OutType::BF16 ? _mm512_cvtepi32_epi16(t.w) : _mm512_castsi512_si256(t.w);
  _mm256_store_si256(reinterpret_cast<__m256i*>(m.u16), w);
}

// 16 packed bytes -> 32 word indices in element order (high nibble first),
// times 2 when `Doubled` (lookups in a dword table).
template <bool Doubled>
inline __m512i nibble_words(const uint8_t* p) {
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  if constexpr (Doubled) {
    // ((d << 17) | (d >> 3)) & 0x001E001E: imm (0xF0 | 0xCC) & 0xAA.
    return _mm512_ternarylogic_epi32(_mm512_slli_epi32(d, 17), _mm512_srli_epi32(d, 3), _mm512_set1_epi32(0x001E001E),
                                     0xA8);
  } else {
    // ((d << 16) & 0x000F0000) | (d >> 4): imm (0xF0 & 0xAA) | 0xCC.
    return _mm512_ternarylogic_epi32(_mm512_slli_epi32(d, 16), _mm512_srli_epi32(d, 4), _mm512_set1_epi32(0x000F0000),
                                     0xEC);
  }
}

template <bool Stream>
inline void store512(void* o, __m512i v) {
  if constexpr (Stream) _mm512_stream_si512(static_cast<__m512i*>(o), v);
  else _mm512_storeu_si512(o, v);
}

// Elements [v, v_end) (multiples of 32, one block) to o.
template <bool Stream, OutType T>
inline void vector_span(const DequantArgs& a, const Table& t, int64_t v, int64_t v_end, char* o) {
  const uint8_t* p = a.packed + (v >> 1);
  if constexpr (T == OutType::F32) {
    for (; v < v_end; v += 32, p += 16, o += 128) {
      const __m512i w = nibble_words<false>(p);
      const __m512i i0 = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(w));
      const __m512i i1 = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(w, 1));
      store512<Stream>(o, _mm512_castps_si512(_mm512_permutexvar_ps(i0, t.f32)));
      store512<Stream>(o + 64, _mm512_castps_si512(_mm512_permutexvar_ps(i1, t.f32)));
    }
  } else {
    for (; v < v_end; v += 32, p += 16, o += 64)
      store512<Stream>(o, _mm512_permutexvar_epi16(nibble_words<T == OutType::BF16>(p), t.w));
  }
}

inline __m512 load_code(const DequantArgs& a) { return _mm512_loadu_ps(a.code); }

#elif defined(__AVX2__)

// fp32 -> bf16 bits, nearest even, NaN -> 0x7FC0, 8 lanes as dwords.
inline __m256i bf16_bits32(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
}

struct CodeRegs {
  __m256 lo, hi;
};

struct Table {
  __m256 lo, hi;     // fp32 outputs 0..7, 8..15
  __m256i lob, hib;  // low / high bytes of the 16-bit outputs, in both 128-bit lanes
};

template <OutType T>
inline Table make_table(const CodeRegs& code, float s) {
  Table t;
  const __m256 sv = _mm256_set1_ps(s);
  t.lo = _mm256_mul_ps(code.lo, sv);
  t.hi = _mm256_mul_ps(code.hi, sv);
  if constexpr (T == OutType::F32) {
    t.lob = t.hib = _mm256_setzero_si256();
  } else {
    __m256i words;  // the 16 outputs as words, in order
    if constexpr (T == OutType::BF16) {
      // packus interleaves 128-bit lanes; the permute restores the order.
      words = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_bits32(t.lo), bf16_bits32(t.hi)), 0xD8);
    } else {
      const int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      words = _mm256_set_m128i(_mm256_cvtps_ph(t.hi, r), _mm256_cvtps_ph(t.lo, r));
    }
    // Per lane: low bytes of its 8 words, then their high bytes.
    const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                           14, 1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i s2 = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(words, split), 0xD8);  // [16 low | 16 high bytes]
    t.lob = _mm256_permute2x128_si256(s2, s2, 0x00);
    t.hib = _mm256_permute2x128_si256(s2, s2, 0x11);
  }
  return t;
}

template <OutType T>
inline void to_arrays(const Table& t, TableArrays& m) {
  _mm256_store_ps(m.f32, t.lo);
  _mm256_store_ps(m.f32 + 8, t.hi);
  alignas(32) uint8_t lo[32], hi[32];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lo), t.lob);
  _mm256_store_si256(reinterpret_cast<__m256i*>(hi), t.hib);
  for (int k = 0; k < 16; ++k) m.u16[k] = static_cast<uint16_t>(lo[k] | (hi[k] << 8));
}

template <bool Stream>
inline void store256(void* o, __m256i v) {
  if constexpr (Stream) _mm256_stream_si256(static_cast<__m256i*>(o), v);
  else _mm256_storeu_si256(static_cast<__m256i*>(o), v);
}

// Elements [v, v_end) (multiples of 32, one block) to o.
template <bool Stream, OutType T>
inline void vector_span(const DequantArgs& a, const Table& t, int64_t v, int64_t v_end, char* o) {
  const uint8_t* p = a.packed + (v >> 1);
  const __m128i mask = _mm_set1_epi8(0x0F);
  for (; v < v_end; v += 32, p += 16) {
    // 16 bytes -> 32 nibbles in element order: n0 = elements 0..15, n1 = 16..31.
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi4 = _mm_and_si128(_mm_srli_epi16(b, 4), mask), lo4 = _mm_and_si128(b, mask);
    const __m128i n0 = _mm_unpacklo_epi8(hi4, lo4), n1 = _mm_unpackhi_epi8(hi4, lo4);
    if constexpr (T == OutType::F32) {
      const __m128i parts[4] = {n0, _mm_srli_si128(n0, 8), n1, _mm_srli_si128(n1, 8)};
      for (int q = 0; q < 4; ++q, o += 32) {
        const __m256i idx = _mm256_cvtepu8_epi32(parts[q]);
        const __m256 from_lo = _mm256_permutevar8x32_ps(t.lo, idx);
        const __m256 from_hi = _mm256_permutevar8x32_ps(t.hi, idx);
        // Bit 3 of the code picks the upper half of the table.
        const __m256 pick_hi = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
        store256<Stream>(o, _mm256_castps_si256(_mm256_blendv_ps(from_lo, from_hi, pick_hi)));
      }
    } else {
      const __m256i n = _mm256_set_m128i(n1, n0);
      const __m256i l = _mm256_shuffle_epi8(t.lob, n), h = _mm256_shuffle_epi8(t.hib, n);
      const __m256i w0 = _mm256_unpacklo_epi8(l, h);  // elements 0..7 | 16..23
      const __m256i w1 = _mm256_unpackhi_epi8(l, h);  // elements 8..15 | 24..31
      store256<Stream>(o, _mm256_permute2x128_si256(w0, w1, 0x20));
      store256<Stream>(o + 32, _mm256_permute2x128_si256(w0, w1, 0x31));
      o += 64;
    }
  }
}

inline CodeRegs load_code(const DequantArgs& a) { return {_mm256_loadu_ps(a.code), _mm256_loadu_ps(a.code + 8)}; }

#else

inline uint16_t bits_of(float v, OutType t) {
  if (t == OutType::BF16) return c10::BFloat16(v).x;  // round to nearest even, NaN -> 0x7FC0
  return c10::Half(v).x;
}

using Table = TableArrays;

struct CodeRegs {
  const float* code;
};

template <OutType T>
inline Table make_table(const CodeRegs& c, float s) {
  Table t;
  for (int k = 0; k < 16; ++k) {
    t.f32[k] = c.code[k] * s;
    t.u16[k] = T == OutType::F32 ? 0 : bits_of(t.f32[k], T);
  }
  return t;
}

template <OutType T>
inline void to_arrays(const Table& t, TableArrays& m) { m = t; }

template <bool Stream, OutType T>
inline void vector_span(const DequantArgs& a, const Table& t, int64_t v, int64_t v_end, char* o) {
  scalar_span<T>(a, t, v, v_end, o);
}

inline CodeRegs load_code(const DequantArgs& a) { return {a.code}; }

#endif

// `count` whole blocks of kBlock elements (kBlock = 0: a.blocksize) from
// element e: the hot loop, no edge checks, fixed trip count for QLoRA's 64.
template <bool Stream, OutType T, int64_t kBlock, class Code>
inline void whole_blocks(const DequantArgs& a, const Code& code, BlockScales& scales, int64_t e, int64_t count,
                         char* o) {
  constexpr int64_t elem = T == OutType::F32 ? 4 : 2;
  const int64_t bs = kBlock ? kBlock : a.blocksize;
  for (int64_t k = 0; k < count; ++k, e += bs, o += bs * elem)
    vector_span<Stream, T>(a, make_table<T>(code, scales.next()), e, e + bs, o);
}

template <bool Stream, OutType T>
void dequant_blocks(const DequantArgs& a, int64_t begin, int64_t end, char* o) {
  constexpr int64_t elem = T == OutType::F32 ? 4 : 2;
  const auto code = load_code(a);
  const int64_t bs = a.blocksize;
  BlockScales scales(a, begin / bs);
  TableArrays arrays;
  for (int64_t e = begin; e < end;) {
    const int64_t block_start = e / bs * bs;
    if (e == block_start && end - e >= bs) {
      const int64_t count = (end - e) / bs;
      if (bs == 64) whole_blocks<Stream, T, 64>(a, code, scales, e, count, o);
      else whole_blocks<Stream, T, 0>(a, code, scales, e, count, o);
      e += count * bs;
      o += count * bs * elem;
      continue;
    }
    // A partial block: scalar head up to a multiple of 32, vectors, scalar tail.
    const int64_t block_end = std::min(end, block_start + bs);
    const auto t = make_table<T>(code, scales.next());
    const int64_t v0 = std::min(block_end, (e + 31) / 32 * 32);
    const int64_t v1 = std::max(v0, block_end / 32 * 32);
    to_arrays<T>(t, arrays);
    scalar_span<T>(a, arrays, e, v0, o);
    vector_span<Stream, T>(a, t, v0, v1, o + (v0 - e) * elem);
    scalar_span<T>(a, arrays, v1, block_end, o + (v1 - e) * elem);
    o += (block_end - e) * elem;
    e = block_end;
  }
}

template <bool Stream>
void dequant_typed(const DequantArgs& a, int64_t begin, int64_t end, char* o) {
  switch (a.out_type) {
    case OutType::F32: return dequant_blocks<Stream, OutType::F32>(a, begin, end, o);
    case OutType::BF16: return dequant_blocks<Stream, OutType::BF16>(a, begin, end, o);
    case OutType::F16: return dequant_blocks<Stream, OutType::F16>(a, begin, end, o);
  }
}

void dequant_range(const DequantArgs& a, int64_t begin, int64_t end, void* out) {
  if (end <= begin) return;
  char* o = static_cast<char*>(out);
#if defined(__AVX2__) || defined(__AVX512F__)
  const int64_t elem = a.out_type == OutType::F32 ? 4 : 2;
  const int64_t v0 = (begin + 31) / 32 * 32;
  if (a.stream && (reinterpret_cast<uintptr_t>(o + (v0 - begin) * elem) & 63) == 0) {
    dequant_typed<true>(a, begin, end, o);
    _mm_sfence();  // order the non-temporal stores before the caller's join
    return;
  }
#endif
  dequant_typed<false>(a, begin, end, o);
}

}  // namespace

extern const DequantKernels FTCORE_DEQUANT_KERNELS = {&dequant_range, FTCORE_DEQUANT_ISA};

}  // namespace ftcore::plugins::bnb4bit

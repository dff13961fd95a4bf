// Blockwise 8-bit dequantize / requantize in AVX-512BW registers, for the
// 8-bit optimizer kernels built for AVX-512 (optim8bit_kernel_impl.h includes
// it into that translation unit's anonymous namespace only). Same codes and
// values as the scalar rule of blockwise8.h, bit for bit; the proof is below
// and tests/unit/blockwise8_kernels_test.cpp checks it exhaustively.
//
// Why: the scalar rule looks each code up in a 65536-byte table, one load per
// element (x86 has no byte gather), and dequantizing looks up a float per
// byte; on the 8-bit optimizer step those lookups cost more than the update
// itself. Here both are register permutes, 16 or 32 lanes at a time.
//
// Dequantize: value = code[q] * absmax. The 256 map values sit in 16
// registers as their upper and lower 16-bit halves; per half VPERMT2W picks
// among 64 entries by the low 6 bits of q, bits 6 and 7 select among four
// results, and the halves are interleaved back into the float's 32 bits.
// Built with AVX512-VBMI (optim8bit_kernel_avx512vbmi.cpp), the values sit as
// four byte planes instead, and VPERMT2B picks 64 bytes at once among 128 by
// the low 7 bits of q, bit 7 selects: 8 two-table permutes per 64 values
// where the halves take 16, and on Intel cores VPERMT2B costs what VPERMT2W
// does. Same bits either way, same product, same value.
//
// Requantize. Scalar rule (blockwise8.h, quantize_element.h), per element x
// of a block with inv = 1 / absmax (fp32):
//   key(x) = (uint16) trunc(fma((clamp(x * inv, -1, 1) + 1) * 0.5, 65535, 0.5))
//   code(x) = lut[key(x)]
// (1) The key. The vector code performs the same IEEE operations on each lane:
//   x * inv, the clamp as max(-1, n) then min(1, n) (VMAXPS/VMINPS return
//   their second operand when either is NaN, so a NaN n stays NaN exactly as
//   the scalar n < -1 ? -1 : (n > 1 ? 1 : n) keeps it), + 1, then (1'') one
//   fused multiply-add for the scalar's * 0.5 and its fused multiply-add, and
//   VCVTTPS2DQ, the truncation the scalar cast compiles to (NaN gives
//   INT32_MIN). The 32 -> 16-bit pack (VPACKUSDW) saturates: keys in
//   [0, 65535] pass unchanged, INT32_MIN becomes 0 = (uint16) INT32_MIN.
// (1') The clamp is skipped when inv is a normal float: then inv = (1/absmax)(1 + d),
//   |d| <= 2^-24, and every non-NaN x has |x| <= absmax, so |x * inv| <= 1 + 2^-24
//   before rounding, which rounds to at most 1 (1 + 2^-24 is the tie between 1 and
//   1 + 2^-23 and goes to the even 1): clamping would change nothing, and a NaN
//   is not clamped either way. (A subnormal or infinite inv keeps the clamp.)
// (1'') (n + 1) * 0.5 is exact: n is in [-1, 1] (or NaN), and n + 1 rounds to 0
//   or to at least 2^-24 (the float next above -1 is -1 + 2^-24), never to a
//   subnormal, so halving it rounds nothing. Hence
//   fma((n + 1) * 0.5, 65535, 0.5) = fma(n + 1, 32767.5, 0.5) (32767.5 = 65535 / 2
//   has 16 significant bits: exact in fp32), one multiply less; a NaN stays NaN.
// (2) The code as a count. lut[k] = #{i : mid_i < grid(k)} with grid(k)
//   non-decreasing in k (make_quant_map), so lut is non-decreasing with
//   lut[65535] = 255 (make_quant_map checks it). With
//   step_at[i] = min{k : lut[k] > i} (i = 0..254), lut[k] > i <=> k >= step_at[i],
//   hence lut[k] = #{i : step_at[i] <= k} =: N(k), and step_at is sorted.
// (3) The search. c starts at 0; for s = 128, 64, ..., 1:
//   if (k >= step_at[c + s - 1]) c += s.
//   Invariant: before the step of size s, c = 2s * floor(N / 2s) (true for
//   s = 128 as N <= 255). Then c + s - 1 <= 254, and since step_at is sorted,
//   k >= step_at[c + s - 1] <=> at least c + s entries are <= k <=> N >= c + s;
//   so after the step c = s * floor(N / s). After s = 1, c = N(k) = lut[k].
//   Ties cannot differ: equal keys give equal codes, and step_at is derived
//   from the very table the scalar rule reads.
// The vector search keeps its decisions bit-reversed, r = sum of bit l for
// each level l where it stepped up (c = reverse8(r)), so the node index of
// level l is r itself, below 2^l: the candidates come from the level's table
// (QuantMap::search_tree, stored in that order): level 1's two nodes by a
// blend on level 0's decision mask, up to 32 nodes by one VPERMW (which reads
// only the index's low 5 bits), 64 by one VPERMT2W, 128 by two and a blend on
// bit 6 (with VBMI: two chains' r packed to bytes pick from the level's low-
// and high-byte planes by one VPERMT2B each); one byte shuffle per nibble
// reverses r at the end. On the shuffle port, which bounds the codec (VPERMW
// and VPCMPUW 1 cycle, VPERMT2W and VPERMT2B 2 cycles on this CPU,
// docs/benchmarks.md stop 33), a search of 32 keys with its pack and store
// costs about 20 cycles with VBMI, 22 without.
// Keys and candidates compare as unsigned 16-bit integers (VPCMPUW).
//
// Included by optim8bit_kernel_impl.h into its anonymous namespace (after
// <immintrin.h>, blockwise8.h and quantize_element.h), like quantize_element.h.
#pragma once

// One map's registers for a chunk: its 256 values and its search tree.
struct VectorCodec {
  explicit VectorCodec(const QuantMap& map) : map_(map) {
    alignas(64) uint16_t high[256], low[256];
    for (int i = 0; i < 256; ++i) {
      uint32_t u;
      std::memcpy(&u, &map.code[i], 4);
      high[i] = static_cast<uint16_t>(u >> 16);
      low[i] = static_cast<uint16_t>(u);
    }
    for (int r = 0; r < 8; ++r) {
      high_[r] = _mm512_load_si512(high + 32 * r);
      low_[r] = _mm512_load_si512(low + 32 * r);
    }
    const uint16_t* tree = map.search_tree.data();
    // Level l starts at 2^l - 1; a 32-entry load past a short level reads
    // entries the permute never selects (indices < 2^l).
    root_ = _mm512_set1_epi16(static_cast<short>(tree[0]));
    for (int l = 2; l < 6; ++l) levels_[l] = _mm512_loadu_si512(tree + (1 << l) - 1);
    for (int r = 0; r < 2; ++r) level6_[r] = _mm512_loadu_si512(tree + 63 + 32 * r);
    for (int r = 0; r < 4; ++r) level7_[r] = _mm512_loadu_si512(tree + 127 + 32 * r);  // [127, 255)
    for (int r = 0; r < 2; ++r) level1_[r] = _mm512_set1_epi16(static_cast<short>(tree[1 + r]));
#if defined(__AVX512VBMI__)
    load_byte_planes(tree + 127, level7_bytes_);
    load_byte_planes(map.code.data(), planes_);
#endif
  }

  // out[j] = code[q[j]] * absmax, j < len.
#if defined(__AVX512VBMI__)
  void dequantize(const uint8_t* __restrict q, int64_t len, float absmax, float* __restrict out) const {
    const __m512 a = _mm512_set1_ps(absmax);
    // The unpacks below interleave within 128-bit lanes: byte 16L + 4k + d of
    // the permuted codes becomes float 4L + d of output register k, so that
    // byte holds code 16k + 4L + d.
    alignas(64) static constexpr uint8_t kSpread[64] = {
        0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51,  4, 5, 6, 7, 20, 21, 22, 23, 36, 37, 38, 39, 52, 53, 54, 55,
        8, 9, 10, 11, 24, 25, 26, 27, 40, 41, 42, 43, 56, 57, 58, 59, 12, 13, 14, 15, 28, 29, 30, 31, 44, 45, 46, 47, 60, 61, 62, 63};
    const __m512i spread = _mm512_load_si512(kSpread);
    int64_t j = 0;
    for (; j + 64 <= len; j += 64) {
      const __m512i idx = _mm512_permutexvar_epi8(spread, _mm512_loadu_si512(q + j));
      const __mmask64 bit7 = _mm512_movepi8_mask(idx);
      __m512i byte[4];  // byte b of each code's value
      for (int b = 0; b < 4; ++b)
        byte[b] = _mm512_mask_blend_epi8(bit7, _mm512_permutex2var_epi8(planes_[b][0], idx, planes_[b][1]),
                                         _mm512_permutex2var_epi8(planes_[b][2], idx, planes_[b][3]));
      const __m512i low01 = _mm512_unpacklo_epi8(byte[0], byte[1]), high01 = _mm512_unpackhi_epi8(byte[0], byte[1]);
      const __m512i low23 = _mm512_unpacklo_epi8(byte[2], byte[3]), high23 = _mm512_unpackhi_epi8(byte[2], byte[3]);
      const __m512i value[4] = {_mm512_unpacklo_epi16(low01, low23), _mm512_unpackhi_epi16(low01, low23),
                                _mm512_unpacklo_epi16(high01, high23), _mm512_unpackhi_epi16(high01, high23)};
      for (int k = 0; k < 4; ++k) _mm512_storeu_ps(out + j + 16 * k, _mm512_mul_ps(_mm512_castsi512_ps(value[k]), a));
    }
    for (; j < len; ++j) out[j] = map_.code[q[j]] * absmax;
  }
#else
  void dequantize(const uint8_t* __restrict q, int64_t len, float absmax, float* __restrict out) const {
    const __m512 a = _mm512_set1_ps(absmax);
    const __m512i bit6 = _mm512_set1_epi16(64), bit7 = _mm512_set1_epi16(128);
    // The unpacks below interleave within 128-bit lanes; codes are first placed
    // so that they yield elements 0..15 and 16..31 in order.
    const __m512i spread = _mm512_set_epi16(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8,  //
                                            23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
    int64_t j = 0;
    for (; j + 32 <= len; j += 32) {
      const __m512i idx = _mm512_permutexvar_epi16(
          spread, _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + j))));
      const __mmask32 b6 = _mm512_test_epi16_mask(idx, bit6), b7 = _mm512_test_epi16_mask(idx, bit7);
      const __m512i hi = lookup_half(high_, idx, b6, b7), lo = lookup_half(low_, idx, b6, b7);
      const __m512 first = _mm512_castsi512_ps(_mm512_unpacklo_epi16(lo, hi));
      const __m512 second = _mm512_castsi512_ps(_mm512_unpackhi_epi16(lo, hi));
      _mm512_storeu_ps(out + j, _mm512_mul_ps(first, a));
      _mm512_storeu_ps(out + j + 16, _mm512_mul_ps(second, a));
    }
    for (; j < len; ++j) out[j] = map_.code[q[j]] * absmax;
  }
#endif

  // Codes of x[0, len) under inv = 1 / absmax, absmax = max |x| > 0 (NaN skipped).
  void requantize(const float* __restrict x, int64_t len, float inv, uint8_t* __restrict codes) const {
    if (std::isnormal(inv)) requantize_with<false>(x, len, inv, codes);  // (1'): the clamp changes nothing
    else requantize_with<true>(x, len, inv, codes);
  }

 private:
  template <bool kClamp>
  void requantize_with(const float* __restrict x, int64_t len, float inv, uint8_t* __restrict codes) const {
    const __m512 vinv = _mm512_set1_ps(inv);
    int64_t j = 0;
    for (; j + 128 <= len; j += 128) requantize_round<4, kClamp>(x + j, vinv, codes + j);
    for (; j + 64 <= len; j += 64) requantize_round<2, kClamp>(x + j, vinv, codes + j);
    for (; j < len; ++j) codes[j] = quantize_element(map_.lut.data(), x[j], inv);
  }

  // Codes of kChains x 32 elements. Independent searches advance step by
  // step, so their long permute -> compare -> add chains overlap: four fill
  // the pipeline alone; two serve a block's 64-element remainder.
  template <int kChains, bool kClamp>
  void requantize_round(const float* __restrict x, __m512 inv, uint8_t* __restrict codes) const {
    __m512i key[kChains], r[kChains];
    keys_of<kChains, kClamp>(x, inv, key);
    search_steps(std::make_integer_sequence<int, kSearchSteps>{}, [&]<int S>() { search_step<S>(key, r); });
    store_codes<kChains>(r, codes);
  }

 public:
  // The elements requantize_two_rounds takes per state, and its calls of between.
  static constexpr int64_t kTwoRoundsElements = 128;
  static constexpr int kBetweenCalls = 8;  // before the first search step and after each

  // Codes of 128 elements of each of two states (a's map for xa, b's for xb),
  // each inv = 1 / absmax a normal float: their eight searches advance
  // step by step together, and between(std::integral_constant<int, s>) runs
  // once before the first step (s = 0) and after each of the seven
  // (s = 1..7). The optimizer step passes its update there:
  // the update waits on the divider, the searches on the shuffle port, and
  // issued in this order both stay busy (docs/benchmarks.md, stop 33). Same
  // codes as requantize of each state.
  template <typename Between>
  static void requantize_two_rounds(const VectorCodec& a, const float* __restrict xa, float inva,
                                    uint8_t* __restrict codes_a, const VectorCodec& b, const float* __restrict xb,
                                    float invb, uint8_t* __restrict codes_b, Between&& between) {
    __m512i key_a[4], key_b[4], r_a[4], r_b[4];
    keys_of<4, false>(xa, _mm512_set1_ps(inva), key_a);
    keys_of<4, false>(xb, _mm512_set1_ps(invb), key_b);
    between(std::integral_constant<int, 0>{});
    search_steps(std::make_integer_sequence<int, kSearchSteps>{}, [&]<int S>() {
      a.search_step<S>(key_a, r_a);
      b.search_step<S>(key_b, r_b);
      between(std::integral_constant<int, S + 1>{});
    });
    store_codes<4>(r_a, codes_a);
    store_codes<4>(r_b, codes_b);
  }

 private:
  // The search's steps: levels 0 and 1, then one level each.
  static constexpr int kSearchSteps = 7;
  static_assert(kBetweenCalls == kSearchSteps + 1);

  template <int... S, typename Step>
  static void search_steps(std::integer_sequence<int, S...>, Step&& step) {
    (step.template operator()<S>(), ...);
  }

  // Unsigned 16-bit grid keys of kChains x 32 elements, two packed registers of 16 each.
  template <int kChains, bool kClamp>
  static void keys_of(const float* __restrict x, __m512 inv, __m512i (&key)[kChains]) {
    for (int h = 0; h < kChains; ++h)
      key[h] = _mm512_packus_epi32(grid_keys<kClamp>(x + 32 * h, inv), grid_keys<kClamp>(x + 32 * h + 16, inv));
  }

  // Bytes reverse8(r) of kChains x 32 searches, stored as codes in element order.
  template <int kChains>
  static void store_codes(const __m512i (&r)[kChains], uint8_t* __restrict codes) {
    // The two packs interleave 128-bit lanes: dword d of the packed bytes holds
    // elements 16 * (d % 4) + 4 * (d / 4) .. +3; this permute puts them back in order.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    // Bit reversal of a nibble, as the low and as the high nibble of a byte.
    const __m512i rev_low = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15));
    const __m512i rev_high = _mm512_slli_epi16(rev_low, 4);  // bytes < 16: no carry across bytes
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    for (int h = 0; h < kChains / 2; ++h) {
      const __m512i rr = _mm512_packus_epi16(r[2 * h], r[2 * h + 1]);
      // reverse8(r) = reverse4(low nibble) << 4 | reverse4(high nibble)
      const __m512i c = _mm512_or_si512(_mm512_shuffle_epi8(rev_high, _mm512_and_si512(rr, nibble)),
                                        _mm512_shuffle_epi8(rev_low, _mm512_and_si512(_mm512_srli_epi16(rr, 4), nibble)));
      _mm512_storeu_si512(codes + 64 * h, _mm512_permutexvar_epi32(order, c));
    }
  }

  // The int32 grid key of 16 elements: grid_point's operations, lane by lane.
  template <bool kClamp>
  static __m512i grid_keys(const float* x, __m512 inv) {
    const __m512 one = _mm512_set1_ps(1.0f), minus_one = _mm512_set1_ps(-1.0f), half = _mm512_set1_ps(0.5f);
    __m512 n = _mm512_mul_ps(_mm512_loadu_ps(x), inv);
    if constexpr (kClamp) n = _mm512_min_ps(one, _mm512_max_ps(minus_one, n));  // operand order keeps NaN (see above)
    return _mm512_cvttps_epi32(_mm512_fmadd_ps(_mm512_add_ps(n, one), _mm512_set1_ps(32767.5f), half));  // (1'')
  }

  // 16-bit halves of the map's values for 32 codes (bits 6, 7 of each given as masks).
  static __m512i lookup_half(const __m512i (&table)[8], __m512i idx, __mmask32 b6, __mmask32 b7) {
    const __m512i q0 = _mm512_permutex2var_epi16(table[0], idx, table[1]);  // codes 0..63 by the low 6 bits
    const __m512i q1 = _mm512_permutex2var_epi16(table[2], idx, table[3]);
    const __m512i q2 = _mm512_permutex2var_epi16(table[4], idx, table[5]);
    const __m512i q3 = _mm512_permutex2var_epi16(table[6], idx, table[7]);
    return _mm512_mask_blend_epi16(b7, _mm512_mask_blend_epi16(b6, q0, q1), _mm512_mask_blend_epi16(b6, q2, q3));
  }

  // Step S of the binary search of (3) above for kChains x 32 keys, decisions
  // bit-reversed in r: step 0 is levels 0 and 1 (and sets r), step S >= 1 is
  // level S + 1. After step 6, r = reverse8(lut[key]).
  template <int S, int kChains>
  void search_step(const __m512i (&key)[kChains], __m512i (&r)[kChains]) const {
    if constexpr (S == 0) {
      for (int h = 0; h < kChains; ++h) r[h] = first_two_levels(key[h]);
#if defined(__AVX512VBMI__)
    } else if constexpr (S == 6) {
      static_assert(kChains % 2 == 0, "level 7 takes chains in pairs");
      for (int h = 0; h < kChains; h += 2) last_level_pair(key[h], key[h + 1], r[h], r[h + 1]);
#endif
    } else {
      for (int h = 0; h < kChains; ++h) r[h] = level_step<S + 1>(key[h], r[h]);
    }
  }

  // Levels 0 and 1 for 32 keys: the root, then one of level 1's two nodes,
  // picked by a blend on the root's decision mask (no permute).
  __m512i first_two_levels(__m512i key) const {
    const __mmask32 right = _mm512_cmpge_epu16_mask(key, root_);
    const __m512i r = _mm512_maskz_mov_epi16(right, _mm512_set1_epi16(1));
    const __m512i candidate = _mm512_mask_blend_epi16(right, level1_[0], level1_[1]);
    return _mm512_mask_add_epi16(r, _mm512_cmpge_epu16_mask(key, candidate), r, _mm512_set1_epi16(2));
  }

  // Level L >= 2 for 32 keys, r holding the decisions of levels < L.
  template <int L>
  __m512i level_step(__m512i key, __m512i r) const {
    __m512i candidate;
    if constexpr (L < 6) candidate = _mm512_permutexvar_epi16(r, levels_[L]);  // r < 2^L <= 32
    else if constexpr (L == 6) candidate = _mm512_permutex2var_epi16(level6_[0], r, level6_[1]);  // r < 64
    else {  // r < 128: bit 6 picks the pair
      const __m512i low = _mm512_permutex2var_epi16(level7_[0], r, level7_[1]);
      const __m512i high = _mm512_permutex2var_epi16(level7_[2], r, level7_[3]);
      candidate = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(r, _mm512_set1_epi16(64)), low, high);
    }
    return _mm512_mask_add_epi16(r, _mm512_cmpge_epu16_mask(key, candidate), r, _mm512_set1_epi16(1 << L));
  }

#if defined(__AVX512VBMI__)
  // Byte b of values[0, 64 * kRegs) as planes: out[b][r] holds that byte of
  // values 64r .. 64r + 63, for the byte permutes (VPERMT2B).
  template <typename T, int kBytes, int kRegs>
  static void load_byte_planes(const T* values, __m512i (&out)[kBytes][kRegs]) {
    static_assert(sizeof(T) == kBytes && (kBytes == 2 || kBytes == 4));
    using Bits = std::conditional_t<kBytes == 2, uint16_t, uint32_t>;
    alignas(64) uint8_t plane[64 * kRegs];
    for (int b = 0; b < kBytes; ++b) {
      for (int i = 0; i < 64 * kRegs; ++i) {
        Bits u;
        std::memcpy(&u, values + i, sizeof u);
        plane[i] = static_cast<uint8_t>(u >> (8 * b));
      }
      for (int r = 0; r < kRegs; ++r) out[b][r] = _mm512_load_si512(plane + 64 * r);
    }
  }

  // Level 7 for two chains at once: their r (< 128) packed to bytes index the
  // level's candidates as two byte planes (VPERMT2B picks among 128), and
  // the unpacks rebuild each chain's 16-bit candidates in its own lane order
  // (the pack and the unpacks both work within 128-bit lanes: the pack puts
  // r0's 8 words of a lane before r1's, unpacklo/unpackhi take them back).
  // Two byte permutes for 64 keys, where level_step<7> takes four word
  // permutes, a test and a blend.
  void last_level_pair(__m512i key0, __m512i key1, __m512i& r0, __m512i& r1) const {
    const __m512i idx = _mm512_packus_epi16(r0, r1);
    const __m512i low = _mm512_permutex2var_epi8(level7_bytes_[0][0], idx, level7_bytes_[0][1]);
    const __m512i high = _mm512_permutex2var_epi8(level7_bytes_[1][0], idx, level7_bytes_[1][1]);
    const __m512i bit = _mm512_set1_epi16(128);
    r0 = _mm512_mask_add_epi16(r0, _mm512_cmpge_epu16_mask(key0, _mm512_unpacklo_epi8(low, high)), r0, bit);
    r1 = _mm512_mask_add_epi16(r1, _mm512_cmpge_epu16_mask(key1, _mm512_unpackhi_epi8(low, high)), r1, bit);
  }
#endif

  const QuantMap& map_;
  __m512i high_[8], low_[8];  // the values' upper and lower 16 bits
  __m512i root_, level1_[2], levels_[6], level6_[2], level7_[4];  // levels_[0], [1] unused
#if defined(__AVX512VBMI__)
  __m512i planes_[4][4];  // planes_[b][r]: byte b of the values of codes 64r .. 64r + 63
  __m512i level7_bytes_[2][2];  // [0]: low bytes, [1]: high bytes of level 7's 128 candidates
#endif
};

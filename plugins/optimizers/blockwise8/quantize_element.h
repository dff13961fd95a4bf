// One element's code under a map's rounding table (blockwise8.h has the rule).
// Included by the per-ISA kernel files into their anonymous namespace, so
// each ISA gets its own copy (no ODR merging of AVX code into generic code).
//
// fma((n + 1) * 0.5, 65535, 0.5) is what bitsandbytes' compiled kernel
// computes. Without an FMA unit the same value comes from double: t has at
// most 24 significant bits at or above 2^-25, so t * 65535 + 0.5 is exact in
// double and its one rounding to float equals the fused result.
// The grid point of x: float arithmetic only, so a loop of it vectorizes;
// the truncation of a NaN (INT32_MIN) selects grid point 0, as before.
inline int32_t grid_point(float x, float inv_absmax) {
  float n = x * inv_absmax;
  n = n < -1.0f ? -1.0f : (n > 1.0f ? 1.0f : n);
  const float t = (n + 1.0f) * 0.5f;
#if defined(__FMA__)
  const float r = __builtin_fmaf(t, 65535.0f, 0.5f);
#else
  const float r = static_cast<float>(static_cast<double>(t) * 65535.0 + 0.5);
#endif
  return static_cast<int32_t>(r);
}

inline uint8_t quantize_element(const uint8_t* __restrict lut, float x, float inv_absmax) {
  return lut[static_cast<uint16_t>(grid_point(x, inv_absmax))];
}

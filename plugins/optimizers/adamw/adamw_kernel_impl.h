// The AdamW element loop, compiled once per ISA: adamw_kernel_<isa>.cpp
// defines FTCORE_KERNEL_FACTORY and includes this file, with -mavx2/-mavx512f
// set on that file only. Plain loops with __restrict pointers vectorize at
// -O3 (-fno-math-errno lets sqrt vectorize). No fast-math and no FMA
// contraction (-ffp-contract=off): every operation rounds where torch's does,
// and the only fused multiply-add is the one ATen's lerp uses.
#include <algorithm>
#include <cmath>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "adamw_kernel.h"

namespace ftcore::plugins::adamw {
namespace {

template <typename T, bool kAmsgrad, bool kLerpFromEnd>
void update_range(const AdamWTensor& t, int64_t begin, int64_t end) {
  T* __restrict p = static_cast<T*>(t.param);
  const T* __restrict g = static_cast<const T*>(t.grad);
  float* __restrict m = t.exp_avg;
  float* __restrict v = t.exp_avg_sq;
  float* __restrict vmax = t.max_exp_avg_sq;
  const AdamWScalars s = t.scalars;
  for (int64_t i = begin; i < end; ++i) {
    const float gi = static_cast<float>(g[i]);
    const float pi = static_cast<float>(p[i]) * s.decay;
    // ATen's vectorized lerp is one fused multiply-add from the nearer end.
    const float mi = kLerpFromEnd ? std::fma(s.one_minus_beta1 - 1.0f, gi - m[i], gi)
                                  : std::fma(s.one_minus_beta1, gi - m[i], m[i]);
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float second = vi;
    if constexpr (kAmsgrad) {
      second = std::max(vmax[i], vi);
      vmax[i] = second;
    }
    const float denom = std::sqrt(second) / s.bias_correction2_sqrt + s.eps;
    p[i] = static_cast<T>(pi + s.neg_step_size * mi / denom);
  }
}

template <typename T>
void update_chunk(const AdamWTensor& t, int64_t begin, int64_t end) {
  const bool ams = t.max_exp_avg_sq != nullptr, from_end = t.scalars.lerp_from_end;
  if (ams) {
    from_end ? update_range<T, true, true>(t, begin, end) : update_range<T, true, false>(t, begin, end);
  } else {
    from_end ? update_range<T, false, true>(t, begin, end) : update_range<T, false, false>(t, begin, end);
  }
}

}  // namespace

ChunkKernels FTCORE_KERNEL_FACTORY() {
  return {&update_chunk<float>, &update_chunk<c10::BFloat16>, &update_chunk<c10::Half>};
}

}  // namespace ftcore::plugins::adamw

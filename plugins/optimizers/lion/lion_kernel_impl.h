// The Lion element loop, compiled once per ISA: lion_kernel_<isa>.cpp defines
// FTCORE_KERNEL_FACTORY and includes this file, with -mavx2/-mavx512f set on
// that file only. Plain loops over __restrict pointers vectorize at -O3. No
// fast-math and no FMA contraction (-ffp-contract=off): the two fused
// multiply-adds are written out because ATen's add(alpha) uses exactly those.
#include <cmath>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "lion_kernel.h"

namespace ftcore::plugins::lion {
namespace {

template <typename T>
void update_chunk(const LionTensor& t, int64_t begin, int64_t end) {
  T* __restrict p = static_cast<T*>(t.param);
  const T* __restrict g = static_cast<const T*>(t.grad);
  float* __restrict m = t.exp_avg;
  const LionScalars s = t.scalars;
  for (int64_t i = begin; i < end; ++i) {
    const float gi = static_cast<float>(g[i]);
    const float mi = m[i];
    const float c = std::fma(gi, s.one_minus_beta1, mi * s.beta1);
    // Comparisons, not copysign: zero and NaN give 0 and leave p at its decayed value.
    const float sign = static_cast<float>((c > 0.0f) - (c < 0.0f));
    // p + sign * (-lr) is exact in sign, so one rounding, as p.add_(update, alpha=-lr).
    p[i] = static_cast<T>(std::fma(sign, s.neg_lr, static_cast<float>(p[i]) * s.decay));
    m[i] = std::fma(gi, s.one_minus_beta2, mi * s.beta2);
  }
}

}  // namespace

ChunkKernels FTCORE_KERNEL_FACTORY() {
  return {&update_chunk<float>, &update_chunk<c10::BFloat16>, &update_chunk<c10::Half>};
}

}  // namespace ftcore::plugins::lion

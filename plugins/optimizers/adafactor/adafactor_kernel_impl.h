// The Adafactor element loops, compiled once per ISA: adafactor_kernel_<isa>.cpp
// defines FTCORE_KERNEL_FACTORY and includes this file, with -mavx2/-mavx512f
// set on that file only. Plain loops over __restrict pointers vectorize at
// -O3 (-fno-math-errno lets sqrt vectorize). No fast-math and no FMA
// contraction (-ffp-contract=off): every fp32 operation rounds where
// transformers' torch ops round; the fused multiply-adds written out are the
// ones ATen's add(alpha) performs.
//
// Sums run in double over kLanes fixed lanes (element j of a row or chunk
// goes to lane j % kLanes, lanes are added in order), so they vectorize
// without reassociation and every ISA gets the same bits.
#include <cmath>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "adafactor_kernel.h"

namespace ftcore::plugins::adafactor {
namespace {

constexpr int kLanes = 16;

struct LaneSum {
  double lane[kLanes] = {};
  double total() const {
    double s = 0.0;
    for (int k = 0; k < kLanes; ++k) s += lane[k];
    return s;
  }
};

// Calls body(j, lane) for j in [0, n): full blocks of kLanes, then the tail.
template <typename Body>
inline void for_each_lane(int64_t n, Body&& body) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) body(j + k, k);
  for (int k = 0; j + k < n; ++k) body(j + k, k);
}

template <typename T>
void factored_stats(const AdafactorTensor& t, int64_t begin, int64_t end, ChunkStats& stats, float* row_means) {
  const int64_t M = t.rows, N = t.cols;
  const float eps1 = t.config.eps1;
  const int64_t first_matrix = begin / M;
  LaneSum p2;
  for (int64_t r = begin; r < end; ++r) {
    const T* __restrict p = static_cast<const T*>(t.param) + r * N;
    const T* __restrict g = static_cast<const T*>(t.grad) + r * N;
    double* __restrict col = stats.col_sums + (r / M - first_matrix) * N;
    LaneSum row;
    for_each_lane(N, [&](int64_t j, int k) {
      const float gj = static_cast<float>(g[j]);
      const float G = gj * gj + eps1;  // grad**2 + eps1: two roundings
      row.lane[k] += G;
      col[j] += G;
      const double pj = static_cast<float>(p[j]);
      p2.lane[k] += pj * pj;
    });
    // update.mean(dim=-1): ATen's CPU mean is the fp32 sum divided by N.
    row_means[r] = static_cast<float>(row.total()) / static_cast<float>(N);
  }
  stats.sum_p2 += p2.total();
}

template <typename T>
double factored_update_sq(const AdafactorTensor& t, int64_t begin, int64_t end, const ApplyScalars& s) {
  const int64_t M = t.rows, N = t.cols;
  LaneSum u2;
  for (int64_t r = begin; r < end; ++r) {
    const T* __restrict g = static_cast<const T*>(t.grad) + r * N;
    const float* __restrict c = s.col_factor + (r / M) * N;
    const float rf = s.row_factor[r];
    for_each_lane(N, [&](int64_t j, int k) {
      const double u = (rf * c[j]) * static_cast<float>(g[j]);  // mul(r_factor, c_factor).mul_(grad)
      u2.lane[k] += u * u;
    });
  }
  return u2.total();
}

// u -> clipped, scaled, averaged (beta1) update; then p <- p + (-wd*lr)*p - u.
template <typename T, bool kClip, bool kBeta1, bool kDecay>
inline void apply_update(float u, const AdafactorTensor& t, const ApplyScalars& s, T* __restrict p,
                         float* __restrict m, int64_t i) {
  if constexpr (kClip) u = u / s.clip_divisor;
  u = u * s.lr;
  if constexpr (kBeta1) {
    u = std::fma(u, t.config.one_minus_beta1, m[i] * t.config.beta1);  // exp_avg.mul_(beta1).add_(u, alpha=1-beta1)
    m[i] = u;
  }
  float pi = static_cast<float>(p[i]);
  if constexpr (kDecay) pi = std::fma(pi, s.decay_alpha, pi);  // p.add_(p, alpha=-wd*lr)
  p[i] = static_cast<T>(pi - u);
}

template <typename T, bool kClip, bool kBeta1, bool kDecay>
void factored_apply_as(const AdafactorTensor& t, int64_t begin, int64_t end, const ApplyScalars& s) {
  const int64_t M = t.rows, N = t.cols;
  for (int64_t r = begin; r < end; ++r) {
    T* __restrict p = static_cast<T*>(t.param) + r * N;
    const T* __restrict g = static_cast<const T*>(t.grad) + r * N;
    float* __restrict m = t.exp_avg ? t.exp_avg + r * N : nullptr;
    const float* __restrict c = s.col_factor + (r / M) * N;
    const float rf = s.row_factor[r];
    for (int64_t j = 0; j < N; ++j)
      apply_update<T, kClip, kBeta1, kDecay>((rf * c[j]) * static_cast<float>(g[j]), t, s, p, m, j);
  }
}

template <typename T>
void unfactored_stats(const AdafactorTensor& t, int64_t begin, int64_t end, ChunkStats& stats) {
  const T* __restrict p = static_cast<const T*>(t.param) + begin;
  const T* __restrict g = static_cast<const T*>(t.grad) + begin;
  float* __restrict v = t.exp_avg_sq + begin;
  const AdafactorStepConfig c = t.config;
  LaneSum p2, u2;
  for_each_lane(end - begin, [&](int64_t j, int k) {
    const float gj = static_cast<float>(g[j]);
    const float vj = std::fma(gj * gj + c.eps1, c.one_minus_beta2t, v[j] * c.beta2t);
    v[j] = vj;
    const double u = (1.0f / std::sqrt(vj)) * gj;  // exp_avg_sq.rsqrt().mul_(grad)
    u2.lane[k] += u * u;
    const double pj = static_cast<float>(p[j]);
    p2.lane[k] += pj * pj;
  });
  stats.sum_p2 += p2.total();
  stats.sum_u2 += u2.total();
}

template <typename T, bool kClip, bool kBeta1, bool kDecay>
void unfactored_apply_as(const AdafactorTensor& t, int64_t begin, int64_t end, const ApplyScalars& s) {
  T* __restrict p = static_cast<T*>(t.param);
  const T* __restrict g = static_cast<const T*>(t.grad);
  const float* __restrict v = t.exp_avg_sq;
  float* __restrict m = t.exp_avg;
  for (int64_t i = begin; i < end; ++i)
    apply_update<T, kClip, kBeta1, kDecay>((1.0f / std::sqrt(v[i])) * static_cast<float>(g[i]), t, s, p, m, i);
}

// Picks the instantiation for this step's clip / beta1 / decay combination.
template <typename T, template <typename, bool, bool, bool> class Apply>
void dispatch_apply(const AdafactorTensor& t, int64_t begin, int64_t end, const ApplyScalars& s) {
  const bool clip = s.clip_divisor != 1.0f, beta1 = t.config.use_beta1, decay = t.config.weight_decay != 0.0;
  using Run = void (*)(const AdafactorTensor&, int64_t, int64_t, const ApplyScalars&);
  static constexpr Run table[8] = {
      &Apply<T, false, false, false>::run, &Apply<T, false, false, true>::run, &Apply<T, false, true, false>::run,
      &Apply<T, false, true, true>::run,   &Apply<T, true, false, false>::run, &Apply<T, true, false, true>::run,
      &Apply<T, true, true, false>::run,   &Apply<T, true, true, true>::run};
  table[clip * 4 + beta1 * 2 + decay](t, begin, end, s);
}

template <typename T, bool kClip, bool kBeta1, bool kDecay>
struct FactoredApply {
  static void run(const AdafactorTensor& t, int64_t b, int64_t e, const ApplyScalars& s) {
    factored_apply_as<T, kClip, kBeta1, kDecay>(t, b, e, s);
  }
};
template <typename T, bool kClip, bool kBeta1, bool kDecay>
struct UnfactoredApply {
  static void run(const AdafactorTensor& t, int64_t b, int64_t e, const ApplyScalars& s) {
    unfactored_apply_as<T, kClip, kBeta1, kDecay>(t, b, e, s);
  }
};

template <typename T>
ChunkKernels kernels_for() {
  return {&factored_stats<T>, &factored_update_sq<T>, &dispatch_apply<T, FactoredApply>, &unfactored_stats<T>,
          &dispatch_apply<T, UnfactoredApply>};
}

}  // namespace

IsaKernels FTCORE_KERNEL_FACTORY() {
  return {kernels_for<float>(), kernels_for<c10::BFloat16>(), kernels_for<c10::Half>()};
}

}  // namespace ftcore::plugins::adafactor

// bootstrap_interval: the 95% bias-corrected and accelerated (BCa) bootstrap
// confidence interval of the mean of the paired differences (Efron, "Better
// bootstrap confidence intervals", JASA 1987; Efron & Tibshirani, An
// Introduction to the Bootstrap, 1993, section 14.3),
// computed the way scipy.stats.bootstrap((d,), np.mean, method='BCa') does, so
// the two agree up to Monte-Carlo error (they use different random streams).
//
// With theta = mean(d) and B resamples of d drawn with replacement, theta*_b:
//   bias correction  z0 = Phi^-1( (#{theta*_b < theta} + #{theta*_b <= theta}) / 2B )
//                    (ties count half, scipy's percentileofscore kind='mean');
//   acceleration     a  = sum U_i^3 / (6 (sum U_i^2)^(3/2)), U_i the jackknife
//                    influence (n-1)(mean_j theta_(j) - theta_(i)); for the mean
//                    theta_(i) = (n theta - d_i)/(n-1), so U_i = d_i - theta and a
//                    is the sample skewness of d over 6 sqrt(n);
//   levels           alpha_1 = Phi(z0 + (z0 + z_0.025) / (1 - a (z0 + z_0.025))),
//                    alpha_2 = Phi(z0 + (z0 + z_0.975) / (1 - a (z0 + z_0.975)));
//   interval         the alpha_1 and alpha_2 quantiles of theta*, interpolated
//                    linearly between order statistics (numpy's 'linear', type 7).
// Percentile fallback: when z0 is infinite (every resample on one side of theta)
// or a level's denominator 1 - a (z0 + z) is 0, BCa is undefined (scipy returns NaN and warns
// DegenerateDataWarning); we return the plain percentile interval [q_0.025,
// q_0.975] of theta* instead and say so in `method`.
//
// Resample means are summed in one canonical order (see resample_means), so the
// resamples that reorder the data tie with theta exactly; scipy's np.mean sums
// in data order, where such ties can miss by an ulp and shift z0 at small n.
// Resample indices come from std::mt19937_64 (whose output the C++ standard
// fixes) through rejection sampling, not std::uniform_int_distribution (whose
// algorithm each standard library chooses), so a seed gives the same interval
// everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ftcore::ab {

struct BootstrapInterval {
  double low = 0, high = 0;
  std::string method;          // "BCa" or "percentile"
  double bias_correction = 0;  // z0 (BCa only)
  double acceleration = 0;     // a (BCa only)
};

// deltas.size() >= 2 and not all equal (the caller handles those); resamples >= 1.
BootstrapInterval bca_interval_of_mean(const std::vector<double>& deltas, std::uint64_t seed, int resamples,
                                       double confidence = 0.95);

}  // namespace ftcore::ab

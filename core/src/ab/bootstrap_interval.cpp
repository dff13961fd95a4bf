// bootstrap_interval: BCa bootstrap interval of a mean (math in bootstrap_interval.h).
#include "bootstrap_interval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

#include <boost/math/distributions/normal.hpp>

namespace ftcore::ab {
namespace {

// Uniform integer in [0, bound): reject the 2^64 mod bound lowest outputs so the
// rest split evenly over the residues.
std::size_t draw_index(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;  // == 2^64 mod bound
  for (;;) {
    const std::uint64_t x = rng();
    if (x >= threshold) return static_cast<std::size_t>(x % bound);
  }
}

// Means of `resamples` resamples of `sorted` (ascending). Each resample's sum is
// taken as sum_i count_i x sorted_i in index order, so every ordering of the
// same multiset gives bitwise the same mean: in particular the resamples that
// are permutations of the data tie with theta exactly (theta is summed the
// same way), as the "ties count half" of z0 intends, instead of landing an
// ulp either side depending on summation order.
std::vector<double> resample_means(const std::vector<double>& sorted, std::uint64_t seed, int resamples) {
  std::mt19937_64 rng(seed);
  const std::size_t n = sorted.size();
  std::vector<double> means(static_cast<std::size_t>(resamples));
  std::vector<unsigned> counts(n);
  for (double& mean : means) {
    std::fill(counts.begin(), counts.end(), 0u);
    for (std::size_t k = 0; k < n; ++k) ++counts[draw_index(rng, n)];
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(counts[i]) * sorted[i];
    mean = sum / static_cast<double>(n);
  }
  return means;
}

// Quantile p of sorted values, linear interpolation between order statistics
// at h = (B-1) p (Hyndman & Fan type 7, numpy's and scipy.stats.quantile's default).
double linear_quantile(const std::vector<double>& sorted, double p) {
  const double h = static_cast<double>(sorted.size() - 1) * p;
  const auto below = static_cast<std::size_t>(std::floor(h));
  if (below + 1 >= sorted.size()) return sorted.back();
  return sorted[below] + (h - static_cast<double>(below)) * (sorted[below + 1] - sorted[below]);
}

}  // namespace

BootstrapInterval bca_interval_of_mean(const std::vector<double>& deltas, std::uint64_t seed, int resamples,
                                       double confidence) {
  if (deltas.size() < 2) throw std::invalid_argument("bca_interval_of_mean: need at least 2 values");
  if (resamples < 1) throw std::invalid_argument("bca_interval_of_mean: resamples must be >= 1");
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("bca_interval_of_mean: confidence must be in (0, 1)");
  std::vector<double> sorted = deltas;
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  const double theta = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;  // summed as resample_means does

  std::vector<double> means = resample_means(sorted, seed, resamples);
  std::sort(means.begin(), means.end());
  const double alpha = (1 - confidence) / 2;

  // Fraction of resamples below theta, ties counting half.
  const auto strictly_below = std::lower_bound(means.begin(), means.end(), theta) - means.begin();
  const auto at_or_below = std::upper_bound(means.begin(), means.end(), theta) - means.begin();
  const double below_fraction = static_cast<double>(strictly_below + at_or_below) / (2.0 * static_cast<double>(resamples));

  // Acceleration from the jackknife influence values U_i = d_i - theta.
  double sum_u2 = 0, sum_u3 = 0;
  for (double d : deltas) {
    const double u = d - theta;
    sum_u2 += u * u;
    sum_u3 += u * u * u;
  }

  BootstrapInterval out;
  const boost::math::normal standard_normal;
  if (below_fraction > 0 && below_fraction < 1 && sum_u2 > 0) {
    const double z0 = boost::math::quantile(standard_normal, below_fraction);
    const double a = sum_u3 / (6 * std::pow(sum_u2, 1.5));
    const double z_low = boost::math::quantile(standard_normal, alpha);
    const auto adjusted_level = [&](double z) {
      const double shifted = z0 + z;
      return boost::math::cdf(standard_normal, z0 + shifted / (1 - a * shifted));
    };
    // At 1 == a (z0 + z) the level formula divides by zero: BCa is undefined there.
    if (1 - a * (z0 + z_low) != 0 && 1 - a * (z0 - z_low) != 0) {
      out.low = linear_quantile(means, adjusted_level(z_low));
      out.high = linear_quantile(means, adjusted_level(-z_low));
      out.method = "BCa";
      out.bias_correction = z0;
      out.acceleration = a;
      return out;
    }
  }
  out.low = linear_quantile(means, alpha);
  out.high = linear_quantile(means, 1 - alpha);
  out.method = "percentile";
  return out;
}

}  // namespace ftcore::ab

// signed_rank_test: Wilcoxon signed-rank statistic and its scipy-'auto' p-value
// (the math and the choice of method are in signed_rank_test.h).
#include "signed_rank_test.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include <boost/math/distributions/normal.hpp>

namespace ftcore::ab {
namespace {

// scipy's 'auto' thresholds, on the number of differences including zeros.
constexpr std::size_t kLargestExactSample = 50;
constexpr std::size_t kLargestEnumeratedSampleWithTies = 13;

struct Ranking {
  std::vector<double> magnitudes;   // |d| of the nonzero d
  std::vector<bool> positive;       // sign of each, same order
  std::vector<int> doubled_ranks;   // 2 x average rank: an integer even with ties
  double tie_term = 0;              // sum over tie groups of t^3 - t
  bool has_ties = false;
};

Ranking rank_nonzero_magnitudes(const std::vector<double>& deltas) {
  Ranking r;
  for (double d : deltas) {
    if (d == 0) continue;
    r.magnitudes.push_back(std::fabs(d));
    r.positive.push_back(d > 0);
  }
  const std::size_t m = r.magnitudes.size();
  std::vector<std::size_t> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return r.magnitudes[a] < r.magnitudes[b]; });
  r.doubled_ranks.assign(m, 0);
  for (std::size_t start = 0; start < m;) {
    std::size_t end = start + 1;
    while (end < m && r.magnitudes[order[end]] == r.magnitudes[order[start]]) ++end;
    // Ranks start+1 .. end share their average (start+1+end)/2; doubled it is exact.
    const int doubled_average = static_cast<int>(start + 1 + end);
    for (std::size_t k = start; k < end; ++k) r.doubled_ranks[order[k]] = doubled_average;
    const double t = static_cast<double>(end - start);
    r.tie_term += t * t * t - t;
    if (end - start > 1) r.has_ties = true;
    start = end;
  }
  return r;
}

// Two-sided p from the exact null distribution of 2R+ (each sign +/- w.p. 1/2).
double exact_p_value(const std::vector<int>& doubled_ranks, int observed_doubled_r_plus) {
  const int total = std::accumulate(doubled_ranks.begin(), doubled_ranks.end(), 0);
  // counts[s] = number of sign patterns with 2R+ == s; at most 2^50, exact in uint64.
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(total) + 1, 0);
  counts[0] = 1;
  int reachable = 0;
  for (int w : doubled_ranks) {
    for (int s = reachable; s >= 0; --s)
      if (counts[s]) counts[s + w] += counts[s];
    reachable += w;
  }
  std::uint64_t at_or_below = 0, at_or_above = 0;
  for (int s = 0; s <= total; ++s) {
    if (s <= observed_doubled_r_plus) at_or_below += counts[s];
    if (s >= observed_doubled_r_plus) at_or_above += counts[s];
  }
  // 2^m patterns in all; ldexp divides by it exactly (counts < 2^53).
  const int m = static_cast<int>(doubled_ranks.size());
  const double tail = std::ldexp(static_cast<double>(std::min(at_or_below, at_or_above)), -m);
  return std::min(1.0, 2 * tail);
}

double normal_p_value(double r_plus, std::size_t m, double tie_term) {
  const double md = static_cast<double>(m);
  const double mean = md * (md + 1) / 4;
  const double sd = std::sqrt((md * (md + 1) * (2 * md + 1) - tie_term / 2) / 24);
  const double z = (r_plus - mean) / sd;
  const boost::math::normal standard_normal;
  return std::min(1.0, 2 * boost::math::cdf(boost::math::complement(standard_normal, std::fabs(z))));
}

}  // namespace

SignedRankResult signed_rank_test(const std::vector<double>& deltas) {
  const Ranking r = rank_nonzero_magnitudes(deltas);
  const std::size_t m = r.magnitudes.size();
  int doubled_r_plus = 0, doubled_total = 0;
  for (std::size_t i = 0; i < m; ++i) {
    doubled_total += r.doubled_ranks[i];
    if (r.positive[i]) doubled_r_plus += r.doubled_ranks[i];
  }
  SignedRankResult result;
  result.statistic = std::min(doubled_r_plus, doubled_total - doubled_r_plus) / 2.0;
  if (m == 0) {  // nothing to test: p = 1
    result.method = "none";
    return result;
  }

  const std::size_t with_zeros = deltas.size();
  const bool has_zeros = m < with_zeros;
  const bool exact = with_zeros <= kLargestExactSample &&
                     ((!r.has_ties && !has_zeros) || with_zeros <= kLargestEnumeratedSampleWithTies);
  if (exact) {
    result.method = "exact";
    result.p_value = exact_p_value(r.doubled_ranks, doubled_r_plus);
  } else {
    result.method = "normal";
    result.p_value = normal_p_value(doubled_r_plus / 2.0, m, r.tie_term);
  }
  return result;
}

}  // namespace ftcore::ab

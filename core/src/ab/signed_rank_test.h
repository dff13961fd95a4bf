// signed_rank_test: the Wilcoxon signed-rank test (Wilcoxon 1945) of "the
// paired differences are symmetric about 0", two-sided, giving the same
// statistic and p-value as scipy.stats.wilcoxon(d) called with its defaults in
// scipy 1.17 (zero_method='wilcox', correction=False, method='auto').
//
// Statistic. Zero differences are dropped (Wilcoxon's own rule); the m nonzero
// |d| are ranked 1..m, tied values getting the average of their ranks; R+ and
// R- are the rank sums of the positive and negative d; the statistic is
// min(R+, R-). Ties are exact floating-point equality of |d|, as in scipy.
//
// p-value. Under the null each nonzero d is + or - with probability 1/2
// independently, so R+ = sum_i s_i r_i with s_i ~ Bernoulli(1/2). scipy's
// 'auto' picks, with N the number of differences INCLUDING zeros:
//   N > 50                          -> normal approximation;
//   no ties and no zeros (N <= 50)  -> exact null distribution of R+;
//   ties or zeros, N <= 13          -> permutation test over all 2^N sign flips,
//                                      which is exact too (2^13 < its 9999 resamples);
//   ties or zeros, 13 < N <= 50     -> normal approximation.
// Both exact cases are the same computation here: doubled ranks 2 r_i are
// integers, so a dynamic program over subsets counts, for every s, how many of
// the 2^m sign patterns give 2 R+ = s (flipping the sign of a zero changes
// nothing, so zeros scale every count alike and drop out). Then
//   p = min(1, 2 min(P(R+ <= r), P(R+ >= r)))
// with the counts as integers (<= 2^50) divided by 2^m, exactly as scipy gets it.
// Normal approximation (no continuity correction, scipy's default):
//   z = (R+ - m(m+1)/4) / sqrt((m(m+1)(2m+1) - sum_ties (t^3 - t)/2) / 24),
//   p = 2 P(Z > |z|),
// the tie term summing over groups of t equal nonzero |d| (the usual tie
// correction of the variance; e.g. Hollander & Wolfe, Nonparametric Statistical
// Methods, ch. 3).
// All d zero (m == 0): p = 1, method "none" (scipy: 1 for N <= 13, NaN above).
#pragma once

#include <string>
#include <vector>

namespace ftcore::ab {

struct SignedRankResult {
  double statistic = 0;          // min(R+, R-)
  double p_value = 1;            // two-sided
  std::string method = "exact";  // "exact" (DP over sign patterns), "normal", or "none" (every d is 0)
};

SignedRankResult signed_rank_test(const std::vector<double>& deltas);

}  // namespace ftcore::ab

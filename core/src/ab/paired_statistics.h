// paired_statistics: the statistics behind `ftcore ab`. Each arm (a recipe) is
// trained once per seed; for one metric, an arm is compared with the control
// arm seed by seed (the same seed fixes data order and initialisation in both,
// so the differences d_k = treatment_k - control_k cancel what the seed adds).
// Everything here is a function of those n paired differences.
//
// What compare_paired reports, with the reference each follows:
//
//   mean_delta, sd_delta   mean of d and its standard deviation with n-1.
//   t-test                 t = mean / (sd / sqrt n), df = n-1, two-sided p =
//                          2 * P(T_df > |t|)  (Student 1908; == scipy.stats.ttest_rel).
//   Wilcoxon signed-rank   statistic min(R+, R-), ranks of |d| over the nonzero d,
//                          ties averaged; p as scipy.stats.wilcoxon(d) with its
//                          defaults (zero_method='wilcox', correction=False,
//                          method='auto', scipy 1.17): see signed_rank_test.h.
//   95% CI of mean_delta   BCa bootstrap (Efron 1987; Efron & Tibshirani 1993,
//                          section 14.3; == scipy.stats.bootstrap(method='BCa') up
//                          to Monte-Carlo error): see bootstrap_interval.h.
//   probability_of_improvement  (#better + #ties / 2) / n over the seeds.
//   cohens_dz              mean / sd (Cohen 1988, d for paired samples).
//   minimum_detectable_effect   smallest |mean delta| a two-sided paired t-test
//                          at alpha 0.05 with these n seeds detects with power
//                          0.8 if the true sd were the observed one: see
//                          detectable_effect.h.
//   holm_p_value, verdict  Holm (1979) step-down over the arms of one metric.
//
// Degenerate inputs (documented choices, none of them throws):
//   n == 0         every number 0, p-values 1, probability_of_improvement 0.5,
//                  CI [0, 0], minimum_detectable_effect +inf.
//   n == 1         sd_delta, t_statistic and cohens_dz 0 (undefined with n-1 = 0),
//                  p-values 1, CI [-inf, +inf] (one seed says nothing about the
//                  spread), minimum_detectable_effect +inf (no t-test exists).
//   sd_delta == 0  (n >= 2, every d equal to c) the t-test is undefined: t_p_value
//                  is 1 (scipy would give p = 0 for c != 0; we refuse to claim a
//                  difference from data whose spread is zero), t_statistic and
//                  cohens_dz are 0 when c == 0 and +-inf otherwise; the CI is
//                  [min d, max d] (every resample mean lies there; [c, c]),
//                  minimum_detectable_effect 0; Wilcoxon is computed as usual on
//                  the raw d (all d == 0 gives p = 1).
//                  "Equal" is up to rounding: an sd <= 8 ulps of the largest
//                  |control| or |treatment| is set to 0, because seeds that all
//                  gain exactly 0.1 on a k/50 metric give d = 0.1 +- 1e-17, which
//                  scipy reads as t ~ 1e16, p ~ 1e-32.
//   The verdict for all of these is "no detectable difference".
// Errors: std::invalid_argument when the two vectors differ in length, when a
// value is not finite, or when resamples < 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ftcore::ab {

inline constexpr const char* kVerdictBetter = "better";
inline constexpr const char* kVerdictWorse = "worse";
inline constexpr const char* kVerdictNoDifference = "no detectable difference";

struct PairedComparison {
  std::size_t n = 0;                    // seeds paired
  bool higher_is_better = true;         // as given to compare_paired; holm_adjust reads it
  std::vector<double> deltas;           // treatment[k] - control[k]
  double mean_delta = 0, sd_delta = 0;  // sd with n-1
  double ci_low = 0, ci_high = 0;       // 95% bootstrap CI of the mean delta
  std::string ci_method;                // "BCa", or "percentile" (BCa degenerate), or "none" (n < 2 or sd 0)
  double bca_bias_correction = 0;       // z0 of the BCa interval (0 unless ci_method is "BCa")
  double bca_acceleration = 0;          // a of the BCa interval (0 unless ci_method is "BCa")
  double t_statistic = 0, t_p_value = 1;                // paired t-test, two-sided (== scipy.stats.ttest_rel)
  double wilcoxon_statistic = 0, wilcoxon_p_value = 1;  // signed-rank, two-sided (== scipy.stats.wilcoxon defaults)
  std::string wilcoxon_method;          // "exact", "normal" or "none" (see signed_rank_test.h)
  double probability_of_improvement = 0;  // P(treatment better than control) over seeds, ties count 1/2
  double cohens_dz = 0;                   // mean_delta / sd_delta (see degenerate inputs above)
  double holm_p_value = 1;                // t_p_value until holm_adjust sets it
  double minimum_detectable_effect = 0;   // see detectable_effect.h
  std::string verdict;                    // "better", "worse" or "no detectable difference"
};

// higher_is_better: for metrics like exact_match; for losses lower is better.
// seed: the bootstrap's RNG seed (std::mt19937_64), so results are reproducible
// (on every platform: indices are drawn without std::uniform_int_distribution).
// The verdict is set as if this were the only arm (Holm with one comparison is
// the raw p-value); holm_adjust over all arms of the metric replaces it.
PairedComparison compare_paired(const std::vector<double>& control, const std::vector<double>& treatment,
                                bool higher_is_better, std::uint64_t seed, int resamples = 10000);

// Holm-Bonferroni step-down over the arms of one metric (Holm 1979): with the
// t-test p-values sorted p_(1) <= ... <= p_(m),
//   holm_(i) = min(1, max_{j <= i} (m - j + 1) p_(j)),
// which controls the family-wise error rate at alpha under any dependence
// between the arms (they share the control runs, so they are dependent).
// Sets verdict (verdict_for): "better" or "worse" when holm_p_value < alpha AND
// the CI excludes 0 on the same side as mean_delta; else "no detectable
// difference". Which side is better comes from each comparison's
// higher_is_better. Null entries or alpha outside (0, 1) throw.
void holm_adjust(std::vector<PairedComparison*>& comparisons, double alpha = 0.05);

// The verdict for one comparison given its holm_p_value (what holm_adjust sets).
std::string verdict_for(const PairedComparison& c, double alpha = 0.05);

// Sequential futility rule for --stop-hopeless: true when n >= 3 and the 95% CI
// lies entirely on the worse side of -margin, i.e. even the CI's most
// favourable end says the treatment is worse than control by more than margin
// (higher_is_better: ci_high < -margin; lower is better: ci_low > margin).
// margin >= 0, in the metric's units; negative or non-finite throws, and so does
// a higher_is_better that differs from the one c was computed with.
//
// What it controls, honestly:
//  - It only stops adding seeds to an arm. The final comparison still uses every
//    run made, with the same tests and Holm adjustment; it never declares "worse".
//  - Nominally, one look at an arm whose true mean delta is no worse than
//    -margin stops it with probability <= 2.5% (one side of a 95% interval), and
//    K looks (after every seed from n = 3 to N, K = N - 2) with <= 2.5% x K by
//    the union bound. That presumes exact coverage, which the BCa bootstrap does
//    not have at these n: at n = 3 a resample mean takes at most 10 values and
//    the interval ignores the t distribution's heavy tails, so it is too narrow.
//  - Measured (benchmarks/ab_futility_simulation, normal differences, sd sigma,
//    2000 runs, 10000 resamples), for an arm EXACTLY at the margin (true delta
//    -margin, the worst case): stopped at the n = 3 look 15%, n = 4 9.5%, n = 6
//    7%, n = 10 4.7% per look; ever stopped by n = 7: 20%, by n = 10: 21%.
//    For an arm as good as control (true delta 0): ever stopped by n = 10 is 3.8%
//    with margin 0.5 sigma (3.4% at the first look) and 0.55% with margin
//    1 sigma. An arm 1.5 sigma worse, margin 0.5 sigma: stopped by n = 3 61%,
//    by n = 6 82%. So: choose margin >= 1 seed-to-seed sd of the differences
//    when stopping a good arm is costly; most of the risk is at n = 3.
//  - Arms that stop early have fewer seeds, and stopping is decided on data that
//    looked bad, so their mean_delta is biased downwards; read it as "stopped".
bool hopeless(const PairedComparison& c, bool higher_is_better, double margin);

}  // namespace ftcore::ab

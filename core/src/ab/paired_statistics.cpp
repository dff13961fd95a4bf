// paired_statistics: compare_paired, holm_adjust and hopeless (the math and the
// degenerate-input rules are in paired_statistics.h; the Wilcoxon test, the BCa
// interval and the detectable effect each have a file of their own).
#include "paired_statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include <boost/math/distributions/students_t.hpp>

#include "bootstrap_interval.h"
#include "detectable_effect.h"
#include "signed_rank_test.h"

namespace ftcore::ab {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kRoundingUlps = 8;  // see spread_is_rounding

void check_inputs(const std::vector<double>& control, const std::vector<double>& treatment, int resamples) {
  if (control.size() != treatment.size())
    throw std::invalid_argument("compare_paired: control has " + std::to_string(control.size()) +
                                " values, treatment has " + std::to_string(treatment.size()) +
                                "; they must pair seed by seed");
  for (std::size_t k = 0; k < control.size(); ++k)
    if (!std::isfinite(control[k]) || !std::isfinite(treatment[k]))
      throw std::invalid_argument("compare_paired: value " + std::to_string(k) + " is not finite");
  if (resamples < 1)
    throw std::invalid_argument("compare_paired: resamples must be >= 1, got " + std::to_string(resamples));
}

double sample_sd(const std::vector<double>& d, double mean) {
  if (d.size() < 2) return 0;
  double sum_squares = 0;
  for (double x : d) sum_squares += (x - mean) * (x - mean);
  return std::sqrt(sum_squares / static_cast<double>(d.size() - 1));
}

// Metrics like k/50 are not exact in binary, so seeds that all gain exactly
// 0.1 give deltas 0.1 +- 1e-17: without this, that would be t ~ 1e16 and
// "better", while bitwise-equal deltas are degenerate. Spreads within a few
// ulps of the inputs' magnitude count as zero.
bool spread_is_rounding(double sd, const std::vector<double>& control, const std::vector<double>& treatment) {
  double magnitude = 0;
  for (std::size_t k = 0; k < control.size(); ++k)
    magnitude = std::max({magnitude, std::fabs(control[k]), std::fabs(treatment[k])});
  return sd <= kRoundingUlps * std::numeric_limits<double>::epsilon() * magnitude;
}

// The signed infinity of c / 0, or 0 for 0 / 0: what t and d_z are at sd == 0.
double ratio_at_zero_spread(double mean) { return mean == 0 ? 0 : std::copysign(kInfinity, mean); }

void fill_t_test(PairedComparison& c) {
  if (c.n < 2) return;  // t 0, p 1
  if (c.sd_delta == 0) {
    c.t_statistic = ratio_at_zero_spread(c.mean_delta);
    c.t_p_value = 1;  // undefined test; see "sd_delta == 0" in the header
    return;
  }
  c.t_statistic = c.mean_delta / (c.sd_delta / std::sqrt(static_cast<double>(c.n)));
  const boost::math::students_t t_distribution(static_cast<double>(c.n - 1));
  const double upper_tail = boost::math::cdf(boost::math::complement(t_distribution, std::fabs(c.t_statistic)));
  c.t_p_value = std::min(1.0, 2 * upper_tail);
}

void fill_interval(PairedComparison& c, std::uint64_t seed, int resamples) {
  c.ci_method = "none";
  if (c.n == 0) {
    c.ci_low = c.ci_high = 0;
  } else if (c.n == 1) {
    c.ci_low = -kInfinity;
    c.ci_high = kInfinity;
  } else if (c.sd_delta == 0) {  // every resample mean lies within the deltas' rounding spread
    c.ci_low = *std::min_element(c.deltas.begin(), c.deltas.end());
    c.ci_high = *std::max_element(c.deltas.begin(), c.deltas.end());
  } else {
    const BootstrapInterval ci = bca_interval_of_mean(c.deltas, seed, resamples);
    c.ci_low = ci.low;
    c.ci_high = ci.high;
    c.ci_method = ci.method;
    c.bca_bias_correction = ci.bias_correction;
    c.bca_acceleration = ci.acceleration;
  }
}

double probability_of_improvement(const std::vector<double>& deltas, bool higher_is_better) {
  if (deltas.empty()) return 0.5;  // no seeds, no information
  double wins = 0;
  for (double d : deltas) {
    const double improvement = higher_is_better ? d : -d;
    wins += improvement > 0 ? 1.0 : improvement == 0 ? 0.5 : 0.0;
  }
  return wins / static_cast<double>(deltas.size());
}

}  // namespace

PairedComparison compare_paired(const std::vector<double>& control, const std::vector<double>& treatment,
                                bool higher_is_better, std::uint64_t seed, int resamples) {
  check_inputs(control, treatment, resamples);
  PairedComparison c;
  c.n = control.size();
  c.higher_is_better = higher_is_better;
  c.deltas.resize(c.n);
  for (std::size_t k = 0; k < c.n; ++k) c.deltas[k] = treatment[k] - control[k];
  if (c.n > 0) c.mean_delta = std::accumulate(c.deltas.begin(), c.deltas.end(), 0.0) / static_cast<double>(c.n);
  c.sd_delta = sample_sd(c.deltas, c.mean_delta);
  if (spread_is_rounding(c.sd_delta, control, treatment)) c.sd_delta = 0;

  fill_t_test(c);
  const SignedRankResult wilcoxon = signed_rank_test(c.deltas);
  c.wilcoxon_statistic = wilcoxon.statistic;
  c.wilcoxon_p_value = wilcoxon.p_value;
  c.wilcoxon_method = wilcoxon.method;
  fill_interval(c, seed, resamples);
  c.probability_of_improvement = probability_of_improvement(c.deltas, higher_is_better);
  if (c.n >= 2) c.cohens_dz = c.sd_delta > 0 ? c.mean_delta / c.sd_delta : ratio_at_zero_spread(c.mean_delta);
  c.minimum_detectable_effect = minimum_detectable_effect(c.n, c.sd_delta);
  c.holm_p_value = c.t_p_value;  // Holm over one comparison
  c.verdict = verdict_for(c);
  return c;
}

std::string verdict_for(const PairedComparison& c, double alpha) {
  if (!(c.holm_p_value < alpha)) return kVerdictNoDifference;
  // The bootstrap interval must agree with the t-test about the direction.
  const bool increased = c.mean_delta > 0 && c.ci_low > 0;
  const bool decreased = c.mean_delta < 0 && c.ci_high < 0;
  if (!increased && !decreased) return kVerdictNoDifference;
  return increased == c.higher_is_better ? kVerdictBetter : kVerdictWorse;
}

void holm_adjust(std::vector<PairedComparison*>& comparisons, double alpha) {
  if (!(alpha > 0 && alpha < 1)) throw std::invalid_argument("holm_adjust: alpha must be in (0, 1)");
  for (const PairedComparison* c : comparisons)
    if (c == nullptr) throw std::invalid_argument("holm_adjust: null comparison");
  std::vector<PairedComparison*> by_p = comparisons;
  std::stable_sort(by_p.begin(), by_p.end(),
                   [](const PairedComparison* a, const PairedComparison* b) { return a->t_p_value < b->t_p_value; });
  // Step down: the i-th smallest p is tested at alpha / (m - i); the running
  // maximum keeps the adjusted values monotone in p.
  const std::size_t m = by_p.size();
  double running_max = 0;
  for (std::size_t i = 0; i < m; ++i) {
    running_max = std::max(running_max, std::min(1.0, static_cast<double>(m - i) * by_p[i]->t_p_value));
    by_p[i]->holm_p_value = running_max;
    by_p[i]->verdict = verdict_for(*by_p[i], alpha);
  }
}

bool hopeless(const PairedComparison& c, bool higher_is_better, double margin) {
  if (!std::isfinite(margin) || margin < 0)
    throw std::invalid_argument("hopeless: margin must be finite and >= 0, got " + std::to_string(margin));
  if (higher_is_better != c.higher_is_better)
    throw std::invalid_argument("hopeless: higher_is_better differs from the one the comparison was computed with");
  if (c.n < 3) return false;
  return higher_is_better ? c.ci_high < -margin : c.ci_low > margin;
}

}  // namespace ftcore::ab

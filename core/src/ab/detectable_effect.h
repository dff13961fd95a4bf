// detectable_effect: the minimum detectable effect of a paired t-test, i.e. the
// smallest |mean delta| that a two-sided paired t-test at level alpha with n
// seeds detects with the given power, if the true sd of the differences were
// the observed sd_delta (a planning number: it treats sd as known, so read it as
// "with this noise, n seeds resolve effects of about this size").
//
// Under a true mean delta mu the t statistic follows the noncentral t with
// df = n - 1 and noncentrality lambda = mu sqrt(n) / sd (Cohen, Statistical
// Power Analysis for the Behavioral Sciences, 1988, ch. 2). With c = t_(1 - alpha/2, df) the test's critical value,
//   power(lambda) = P(T'_(df, lambda) > c) + P(T'_(df, lambda) < -c),
// which increases with lambda >= 0 from alpha at lambda = 0. We solve
// power(lambda) = target for lambda with TOMS 748 (boost::math::tools) on
// boost::math::non_central_t, and return lambda sd / sqrt(n).
// n < 2: +inf (no t-test exists). sd == 0: 0.
#pragma once

#include <cstddef>

namespace ftcore::ab {

// The noncentrality lambda at which the two-sided t-test with df degrees of
// freedom at level alpha has the given power (df >= 1, 0 < alpha < power < 1).
double noncentrality_for_power(double df, double alpha, double power);

double minimum_detectable_effect(std::size_t n, double sd_delta, double alpha = 0.05, double power = 0.8);

}  // namespace ftcore::ab

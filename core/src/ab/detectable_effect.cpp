// detectable_effect: solve the noncentral-t power equation (math in detectable_effect.h).
#include "detectable_effect.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include <boost/math/distributions/non_central_t.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <boost/math/tools/roots.hpp>
#include <boost/math/tools/toms748_solve.hpp>

namespace ftcore::ab {

double noncentrality_for_power(double df, double alpha, double power) {
  if (!(df >= 1) || !(alpha > 0 && alpha < power && power < 1))
    throw std::invalid_argument("noncentrality_for_power: need df >= 1 and 0 < alpha < power < 1");
  const double critical = boost::math::quantile(boost::math::complement(boost::math::students_t(df), alpha / 2));
  const auto power_minus_target = [&](double lambda) {
    const boost::math::non_central_t shifted(df, lambda);
    const double upper = boost::math::cdf(boost::math::complement(shifted, critical));
    const double lower = boost::math::cdf(shifted, -critical);
    return upper + lower - power;
  };
  // power(0) = alpha < target; double the upper end until power exceeds it.
  double high = 1;
  while (power_minus_target(high) < 0) high *= 2;
  std::uintmax_t max_iterations = 200;
  const auto bracket = boost::math::tools::toms748_solve(power_minus_target, 0.0, high, alpha - power,
                                                         power_minus_target(high),
                                                         boost::math::tools::eps_tolerance<double>(48),
                                                         max_iterations);
  return (bracket.first + bracket.second) / 2;
}

double minimum_detectable_effect(std::size_t n, double sd_delta, double alpha, double power) {
  if (n < 2) return std::numeric_limits<double>::infinity();
  if (sd_delta == 0) return 0;
  const double df = static_cast<double>(n - 1);
  return noncentrality_for_power(df, alpha, power) * sd_delta / std::sqrt(static_cast<double>(n));
}

}  // namespace ftcore::ab

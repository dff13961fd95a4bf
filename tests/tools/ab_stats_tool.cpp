// ab_stats_tool: runs core/src/ab's paired statistics on JSON input so that
// tests/reference/ab_statistics_reference.py can compare them with scipy.stats.
//
//   ab_stats_tool IN.json          (prints the result as JSON on stdout)
//
// IN is one case or a list of cases:
//   {"control": [..], "treatment": [..], "higher_is_better": bool, "seed": int,
//    "resamples": int, "margin": number (optional: also report hopeless()),
//    "hopeless_higher_is_better": bool (optional: what hopeless() is told; to test its check)}
// A list is taken as the arms of one metric: every case is compared, then
// holm_adjust runs over all of them (alpha from an optional top-level
// {"alpha": a, "cases": [..]} form, else 0.05). The output mirrors the input's
// shape with every PairedComparison field; doubles that are not finite are
// written as the strings "inf", "-inf" or "nan" (JSON has no such numbers).
// Errors (std::invalid_argument included) go to stderr with exit status 1.
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "paired_statistics.h"

using nlohmann::json;
namespace ab = ftcore::ab;

namespace {

json number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

json to_json(const ab::PairedComparison& c) {
  json deltas = json::array();
  for (double d : c.deltas) deltas.push_back(number(d));
  return {{"n", c.n},
          {"higher_is_better", c.higher_is_better},
          {"deltas", deltas},
          {"mean_delta", number(c.mean_delta)},
          {"sd_delta", number(c.sd_delta)},
          {"ci_low", number(c.ci_low)},
          {"ci_high", number(c.ci_high)},
          {"ci_method", c.ci_method},
          {"bca_bias_correction", number(c.bca_bias_correction)},
          {"bca_acceleration", number(c.bca_acceleration)},
          {"t_statistic", number(c.t_statistic)},
          {"t_p_value", number(c.t_p_value)},
          {"wilcoxon_statistic", number(c.wilcoxon_statistic)},
          {"wilcoxon_p_value", number(c.wilcoxon_p_value)},
          {"wilcoxon_method", c.wilcoxon_method},
          {"probability_of_improvement", number(c.probability_of_improvement)},
          {"cohens_dz", number(c.cohens_dz)},
          {"holm_p_value", number(c.holm_p_value)},
          {"minimum_detectable_effect", number(c.minimum_detectable_effect)},
          {"verdict", c.verdict}};
}

ab::PairedComparison compare_case(const json& in) {
  return ab::compare_paired(in.at("control").get<std::vector<double>>(),
                            in.at("treatment").get<std::vector<double>>(), in.at("higher_is_better").get<bool>(),
                            in.value("seed", std::uint64_t{0}), in.value("resamples", 10000));
}

json with_hopeless(json out, const json& in, const ab::PairedComparison& c) {
  if (in.contains("margin"))
    out["hopeless"] = ab::hopeless(c, in.value("hopeless_higher_is_better", c.higher_is_better),
                                   in.at("margin").get<double>());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 2) throw std::invalid_argument("usage: ab_stats_tool IN.json");
    std::ifstream file(argv[1]);
    if (!file) throw std::invalid_argument(std::string("cannot open ") + argv[1]);
    const json input = json::parse(file);
    if (input.is_object() && !input.contains("cases")) {
      const ab::PairedComparison c = compare_case(input);
      std::cout << with_hopeless(to_json(c), input, c).dump(1) << "\n";
      return 0;
    }
    const json& cases = input.is_object() ? input.at("cases") : input;
    const double alpha = input.is_object() ? input.value("alpha", 0.05) : 0.05;
    std::vector<ab::PairedComparison> comparisons;
    for (const json& in : cases) comparisons.push_back(compare_case(in));
    std::vector<ab::PairedComparison*> arms;
    for (auto& c : comparisons) arms.push_back(&c);
    ab::holm_adjust(arms, alpha);
    json out = json::array();
    for (std::size_t i = 0; i < comparisons.size(); ++i)
      out.push_back(with_hopeless(to_json(comparisons[i]), cases[i], comparisons[i]));
    std::cout << out.dump(1) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ab_stats_tool: " << e.what() << "\n";
    return 1;
  }
}

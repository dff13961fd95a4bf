// ab_futility_simulation: how often core/src/ab's hopeless() stops an arm, by
// simulation, so paired_statistics.h can state the futility rule's error rates
// as measured rather than as the nominal 2.5% per look.
//
//   ab_futility_simulation [--truth T] [--margin M] [--max-seeds N] [--runs R] [--resamples B]
//
// Each run draws paired differences d_k ~ Normal(T, 1) (so T and M are in units
// of the seed-to-seed sd of the differences), and after every seed from n = 3 to
// N asks hopeless(compare_paired(...), higher_is_better, M) as `ftcore ab
// --stop-hopeless` would. Prints the fraction of runs stopped at each look
// (among all runs, looking at every n whether or not an earlier look stopped)
// and the fraction ever stopped by n. Defaults: T = -M (an arm exactly at the
// margin: the worst case the rule should rarely stop), M = 0.5, N = 10,
// R = 2000, B = 10000. Deterministic (fixed seeds).
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "paired_statistics.h"

int main(int argc, char** argv) {
  double margin = 0.5, truth = -0.5;
  bool truth_given = false;
  int max_seeds = 10, runs = 2000, resamples = 10000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--truth") truth = std::atof(v), truth_given = true;
    else if (k == "--margin") margin = std::atof(v);
    else if (k == "--max-seeds") max_seeds = std::atoi(v);
    else if (k == "--runs") runs = std::atoi(v);
    else if (k == "--resamples") resamples = std::atoi(v);
    else return std::fprintf(stderr, "unknown option %s\n", k.c_str()), 2;
  }
  if (!truth_given) truth = -margin;
  std::mt19937_64 rng(20261201);
  std::normal_distribution<double> noise(truth, 1.0);
  std::vector<int> stopped_at(max_seeds + 1, 0), stopped_by(max_seeds + 1, 0);
  for (int run = 0; run < runs; ++run) {
    std::vector<double> control, treatment;
    bool stopped = false;
    for (int n = 1; n <= max_seeds; ++n) {
      control.push_back(0);
      treatment.push_back(noise(rng));
      if (n >= 3) {
        const auto c = ftcore::ab::compare_paired(control, treatment, true,
                                                  static_cast<std::uint64_t>(run) * 1000 + n, resamples);
        const bool stop = ftcore::ab::hopeless(c, true, margin);
        stopped_at[n] += stop;
        stopped = stopped || stop;
      }
      stopped_by[n] += stopped;
    }
  }
  std::printf("true delta %.3g sd, margin %.3g sd, %d runs, %d resamples\n", truth, margin, runs, resamples);
  for (int n = 3; n <= max_seeds; ++n)
    std::printf("n=%2d  stopped at this look %.4f  ever stopped by n %.4f\n", n, stopped_at[n] / double(runs),
                stopped_by[n] / double(runs));
  return 0;
}

// scheduler/one_cycle: torch.optim.lr_scheduler.OneCycleLR (Smith & Topin,
// "Super-Convergence", https://arxiv.org/abs/1708.07120) as a factor of the
// peak lr: the base lr plays OneCycleLR's max_lr, so
//   initial = 1 / div_factor,  peak = 1,  final = initial / final_div_factor.
// Phases (end steps as torch computes them, P = pct_start, T = total steps):
//   two-phase:   initial -> peak by P T - 1,  peak -> final by T - 1
//   three-phase: initial -> peak by P T - 1,  peak -> initial by 2 P T - 2,
//                initial -> final by T - 1
// Within a phase from step a to step b, with q = (s - a) / (b - a):
//   cos:    end + (start - end) / 2 * (cos(pi q) + 1)
//   linear: start + (end - start) q
// factor(s) is the lr OneCycleLR holds for the optimizer step numbered s
// (after s scheduler steps), divided by max_lr.
//
// Warmup: OneCycleLR's first phase IS the warmup, a ramp from initial (not 0)
// shaped by anneal_strategy. So warmup_steps / warmup_ratio, when given,
// resolve to W steps as for every schedule and set P = W / T (the mapping
// Axolotl uses for its one_cycle); they contradict an explicit pct_start.
// warmup_type has no meaning here and is refused when set.
//
// Where torch raises, ftcore picks the continuous answer: a phase of length 0
// is at its end value; steps at or past T hold the final value; W > T gives P = 1.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <vector>

#include "ftcore/sdk/option_error.h"
#include "warmup_then.h"

namespace ftcore::plugins::schedulers {
namespace {

struct OneCycleOptions {
  std::optional<sdk::Warmup> warmup;  // set when the user gave warmup_steps / warmup_ratio
  double pct_start = 0.3;
  bool cosine = true;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
};

class OneCycle final : public sdk::Scheduler {
 public:
  explicit OneCycle(OneCycleOptions o) : o_(o) {}

  double factor(int64_t step, int64_t total_steps) const override {
    const int64_t total = std::max<int64_t>(1, total_steps);
    const double s = static_cast<double>(std::clamp<int64_t>(step, 0, total - 1));
    const double pct_start = o_.warmup ? std::min(1.0, static_cast<double>(o_.warmup->resolve_steps(total)) /
                                                           static_cast<double>(total))
                                       : o_.pct_start;
    const double initial = 1.0 / o_.div_factor;
    const double peak = 1.0;
    const double final_lr = initial / o_.final_div_factor;

    struct Phase {
      double end_step, start, end;
    };
    std::vector<Phase> phases;
    phases.push_back({pct_start * static_cast<double>(total) - 1, initial, peak});
    if (o_.three_phase) {
      phases.push_back({2 * pct_start * static_cast<double>(total) - 2, peak, initial});
      phases.push_back({static_cast<double>(total - 1), initial, final_lr});
    } else {
      phases.push_back({static_cast<double>(total - 1), peak, final_lr});
    }

    double start_step = 0.0;
    for (size_t i = 0; i < phases.size(); ++i) {
      const Phase& phase = phases[i];
      if (s <= phase.end_step || i + 1 == phases.size()) {
        const double length = phase.end_step - start_step;
        const double q = length != 0.0 ? (s - start_step) / length : 1.0;
        return anneal(phase.start, phase.end, q);
      }
      start_step = phase.end_step;
    }
    return final_lr;  // not reached: the last phase always answers
  }

 private:
  double anneal(double start, double end, double q) const {
    if (o_.cosine) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * q) + 1);
    return (end - start) * q + start;
  }

  OneCycleOptions o_;
};

sdk::ParamSpec one_cycle_spec() {
  sdk::ParamSpec spec;
  sdk::add_warmup_params(spec);
  spec.add_float("pct_start", 0.3)
      .with_range(0.0, 1.0)
      .with_doc("Fraction of the steps spent rising from base_lr/div_factor to the base lr. "
                "warmup_steps or warmup_ratio, if given instead, set it to warmup/total.");
  spec.add_enum("anneal_strategy", {"cos", "linear"}, "cos").with_doc("Shape of every phase: cosine or straight line.");
  spec.add_float("div_factor", 25.0).above(0.0).with_doc("The cycle starts at base_lr / div_factor.");
  spec.add_float("final_div_factor", 1e4)
      .above(0.0)
      .with_doc("The cycle ends at base_lr / (div_factor * final_div_factor).");
  spec.add_bool("three_phase", false)
      .with_doc("Add a phase back down to the starting lr before the final annealing (fast.ai style).");
  spec.exclusive({"pct_start", "warmup_steps"});
  spec.exclusive({"pct_start", "warmup_ratio"});
  return spec;
}

}  // namespace

void register_one_cycle(sdk::Registry& registry) {
  registry.add_scheduler(
      {"one_cycle", "One-cycle policy of torch OneCycleLR, peak = base lr", one_cycle_spec()},
      [](const sdk::Options& options, const sdk::SchedulerContext&) -> std::unique_ptr<sdk::Scheduler> {
        if (options.is_set_by_user("warmup_type"))
          throw sdk::OptionError(
              "one_cycle does not take warmup_type: its rising phase follows anneal_strategy from "
              "base_lr/div_factor; set anneal_strategy instead");
        OneCycleOptions o;
        if (options.has_value("warmup_steps") || options.has_value("warmup_ratio"))
          o.warmup = sdk::Warmup::from_options(options);
        o.pct_start = options.get_float("pct_start");
        o.cosine = options.get_string("anneal_strategy") == "cos";
        o.div_factor = options.get_float("div_factor");
        o.final_div_factor = options.get_float("final_div_factor");
        o.three_phase = options.get_bool("three_phase");
        return std::make_unique<OneCycle>(o);
      });
}

}  // namespace ftcore::plugins::schedulers

// scheduler/constant, scheduler/constant_with_warmup and scheduler/linear.
//
//   constant:  f(s) = 1                              after warmup
//   linear:    f(s) = max(0, (T - s) / max(1, T - W)) after warmup
//
// (s: 0-based optimizer step, T: total steps, W: resolved warmup steps.)
// Without warmup, `constant` is transformers' get_constant_schedule; with
// it, get_constant_schedule_with_warmup. `constant_with_warmup` is the same
// schedule under transformers' name, so a recipe ported from an HF
// `lr_scheduler_type` keeps its spelling. `linear` is
// get_linear_schedule_with_warmup.
#include <algorithm>
#include <memory>

#include "warmup_then.h"

namespace ftcore::plugins::schedulers {
namespace {

class Constant final : public WarmupThen {
 public:
  using WarmupThen::WarmupThen;

 protected:
  double after_warmup(int64_t, int64_t, int64_t) const override { return 1.0; }
};

class Linear final : public WarmupThen {
 public:
  using WarmupThen::WarmupThen;

 protected:
  double after_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps) const override {
    // Straight line from 1 at the end of warmup to 0 at step T; stays 0 past T.
    return std::max(0.0, static_cast<double>(total_steps - step) / at_least_one(total_steps - warmup_steps));
  }
};

template <typename Schedule>
sdk::SchedulerFactory factory_of() {
  return [](const sdk::Options& options, const sdk::SchedulerContext&) -> std::unique_ptr<sdk::Scheduler> {
    return std::make_unique<Schedule>(sdk::Warmup::from_options(options));
  };
}

sdk::ParamSpec warmup_only_spec() {
  sdk::ParamSpec spec;
  sdk::add_warmup_params(spec);
  return spec;
}

}  // namespace

void register_constant_and_linear(sdk::Registry& registry) {
  registry.add_scheduler({"constant", "Constant lr (1 x base lr), after an optional warmup", warmup_only_spec()},
                         factory_of<Constant>());
  registry.add_scheduler({"constant_with_warmup",
                          "Same schedule as `constant`, under transformers' name get_constant_schedule_with_warmup",
                          warmup_only_spec()},
                         factory_of<Constant>());
  registry.add_scheduler({"linear", "Linear decay to 0 at the last step, after warmup (transformers `linear`)",
                          warmup_only_spec()},
                         factory_of<Linear>());
}

}  // namespace ftcore::plugins::schedulers

// scheduler/polynomial and scheduler/inverse_sqrt: decays that follow a
// power of the step.
//
// polynomial (transformers get_polynomial_decay_schedule_with_warmup; BERT's
// and fairseq's polynomial decay), after warmup, with lr0 = base lr and
// lr_end an ABSOLUTE learning rate:
//   f(s) = ((lr0 - lr_end) * (1 - (s - W) / (T - W))^power + lr_end) / lr0    for s <= T
//   f(s) = lr_end / lr0                                                      for s > T
// The factor depends on lr0, which is why the factory reads the context.
//
// inverse_sqrt (transformers get_inverse_sqrt_schedule, after big_vision),
// after warmup, with timescale t (default: W, or 10000 without warmup):
//   f(s) = 1 / sqrt((s + t - W) / t)
// so f(W) = 1 and the lr falls as 1/sqrt(step) from there.
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "ftcore/sdk/option_error.h"
#include "warmup_then.h"

namespace ftcore::plugins::schedulers {
namespace {

class Polynomial final : public WarmupThen {
 public:
  Polynomial(sdk::Warmup warmup, double lr_init, double lr_end, double power)
      : WarmupThen(warmup), lr_init_(lr_init), lr_end_(lr_end), power_(power) {}

 protected:
  double after_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps) const override {
    const int64_t decay_steps = total_steps - warmup_steps;
    // transformers divides by decay_steps unguarded (ZeroDivisionError when
    // warmup fills the run); with no decay phase the schedule is at its end.
    if (step > total_steps || decay_steps <= 0) return lr_end_ / lr_init_;
    const double pct_remaining = 1 - static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps);
    const double lr = (lr_init_ - lr_end_) * std::pow(pct_remaining, power_) + lr_end_;
    return lr / lr_init_;  // the trainer multiplies by lr0 again
  }

 private:
  double lr_init_;
  double lr_end_;
  double power_;
};

class InverseSqrt final : public WarmupThen {
 public:
  InverseSqrt(sdk::Warmup warmup, std::optional<int64_t> timescale) : WarmupThen(warmup), timescale_(timescale) {}

 protected:
  double after_warmup(int64_t step, int64_t warmup_steps, int64_t) const override {
    // Resolved here, not in the factory: W may come from warmup_ratio x total.
    const int64_t timescale = timescale_ ? *timescale_ : (warmup_steps != 0 ? warmup_steps : 10'000);
    const int64_t shift = timescale - warmup_steps;
    return 1.0 / std::sqrt(static_cast<double>(step + shift) / static_cast<double>(timescale));
  }

 private:
  std::optional<int64_t> timescale_;
};

sdk::ParamSpec polynomial_spec() {
  sdk::ParamSpec spec;
  sdk::add_warmup_params(spec);
  spec.add_float("power", 1.0).above(0.0).with_doc("Exponent of the decay; 1 is linear from the base lr to lr_end.");
  spec.add_float("lr_end", 1e-7)
      .at_least(0.0)
      .with_doc("Absolute learning rate reached at the last step; must be below the optimizer's base lr.");
  return spec;
}

sdk::ParamSpec inverse_sqrt_spec() {
  sdk::ParamSpec spec;
  sdk::add_warmup_params(spec);
  spec.add_int("timescale", std::nullopt)
      .at_least(1)
      .with_doc("Steps over which the lr halves as 1/sqrt; unset: the warmup steps, or 10000 without warmup.");
  return spec;
}

}  // namespace

void register_power_decays(sdk::Registry& registry) {
  registry.add_scheduler(
      {"polynomial", "Polynomial decay from the base lr to an absolute lr_end (transformers `polynomial`)",
       polynomial_spec()},
      [](const sdk::Options& options, const sdk::SchedulerContext& context) -> std::unique_ptr<sdk::Scheduler> {
        const double lr_end = options.get_float("lr_end");
        if (!(context.base_lr > lr_end)) {
          std::ostringstream message;
          message << "lr_end (" << lr_end << ") must be smaller than the optimizer's base lr (" << context.base_lr
                  << "): polynomial decays from the base lr down to lr_end";
          throw sdk::OptionError(message.str());
        }
        return std::make_unique<Polynomial>(sdk::Warmup::from_options(options), context.base_lr, lr_end,
                                            options.get_float("power"));
      });
  registry.add_scheduler(
      {"inverse_sqrt", "Inverse square-root decay after warmup (transformers `inverse_sqrt`)", inverse_sqrt_spec()},
      [](const sdk::Options& options, const sdk::SchedulerContext&) -> std::unique_ptr<sdk::Scheduler> {
        std::optional<int64_t> timescale;
        if (options.has_value("timescale")) timescale = options.get_int("timescale");
        return std::make_unique<InverseSqrt>(sdk::Warmup::from_options(options), timescale);
      });
}

}  // namespace ftcore::plugins::schedulers

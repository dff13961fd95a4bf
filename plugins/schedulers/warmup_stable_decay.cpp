// scheduler/warmup_stable_decay: transformers get_wsd_schedule (the
// warmup-stable-decay schedule of MiniCPM, https://arxiv.org/abs/2404.06395).
// Three phases, with m = min_lr_ratio:
//   warmup  s < W:            f = m + (1 - m) w(s)       w: the common warmup ramp
//   stable  s < W + S:        f = 1
//   decay   s < W + S + D:    f = m + (1 - m) d(p),  p = (s - W - S) / max(1, D)
//                             d = 1 - p | 0.5 (1 + cos(2 pi c p)) | 1 - sqrt(p)
//   after:                    f = m
// (each phase value floored at 0, as transformers does). D is num_decay_steps,
// or ceil(decay_ratio x T) like warmup_ratio; S is num_stable_steps, or what
// is left of T: T - W - D.
//
// Differences from transformers, both outside what its own API accepts
// sensibly: the warmup ramp is ftcore's common one (linear or quadratic;
// transformers' cosine and 1-sqrt warmup shapes are not offered), and a
// derived S is floored at 0 where W + D > T (transformers lets it go
// negative, which starts the decay before warmup ends and drops the lr at W).
#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ftcore/sdk/option_error.h"
#include "warmup_then.h"

namespace ftcore::plugins::schedulers {
namespace {

enum class DecayShape { Linear, Cosine, OneMinusSqrt };

struct WsdOptions {
  sdk::Warmup warmup;
  std::optional<int64_t> num_stable_steps;
  std::optional<int64_t> num_decay_steps;
  double decay_ratio = 0.1;
  double min_lr_ratio = 0.0;
  DecayShape decay = DecayShape::Cosine;
  double num_cycles = 0.5;
};

class WarmupStableDecay final : public sdk::Scheduler {
 public:
  explicit WarmupStableDecay(WsdOptions o) : o_(o) {}

  double factor(int64_t step, int64_t total_steps) const override {
    const double m = o_.min_lr_ratio;
    const int64_t warmup_steps = o_.warmup.resolve_steps(total_steps);
    if (step < warmup_steps) return std::max(0.0, o_.warmup.factor(step, warmup_steps) * (1.0 - m) + m);

    const int64_t decay_steps =
        o_.num_decay_steps ? *o_.num_decay_steps
                           : static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * o_.decay_ratio));
    const int64_t stable_steps =
        o_.num_stable_steps ? *o_.num_stable_steps : std::max<int64_t>(0, total_steps - warmup_steps - decay_steps);
    if (step < warmup_steps + stable_steps) return 1.0;
    if (step >= warmup_steps + stable_steps + decay_steps) return m;

    const double p = static_cast<double>(step - warmup_steps - stable_steps) / at_least_one(decay_steps);
    double f = 0.0;
    switch (o_.decay) {
      case DecayShape::Linear: f = 1.0 - p; break;
      case DecayShape::Cosine: f = 0.5 * (1.0 + std::cos(std::numbers::pi * o_.num_cycles * 2.0 * p)); break;
      case DecayShape::OneMinusSqrt: f = 1.0 - std::sqrt(p); break;
    }
    return std::max(0.0, f * (1.0 - m) + m);
  }

 private:
  WsdOptions o_;
};

sdk::ParamSpec wsd_spec() {
  sdk::ParamSpec spec;
  sdk::add_warmup_params(spec);
  spec.add_int("num_stable_steps", std::nullopt)
      .at_least(0)
      .with_doc("Steps at the base lr after warmup; unset: total - warmup - decay steps.");
  spec.add_int("num_decay_steps", std::nullopt).at_least(0).with_doc("Steps of the final decay.");
  spec.add_float("decay_ratio", 0.1)
      .with_range(0.0, 1.0)
      .with_doc("Decay steps as a fraction of total steps, rounded up; used when num_decay_steps is unset.");
  spec.add_float("min_lr_ratio", 0.0)
      .with_range(0.0, 1.0)
      .with_doc("Floor as a fraction of the base lr: warmup starts there and the decay ends there.");
  spec.add_enum("decay_type", {"linear", "cosine", "1-sqrt"}, "cosine").with_doc("Shape of the decay phase.");
  spec.add_float("num_cycles", 0.5)
      .above(0.0)
      .with_doc("Cosine waves over the decay when decay_type is cosine; 0.5 is a half wave.");
  spec.exclusive({"num_decay_steps", "decay_ratio"});
  return spec;
}

DecayShape decay_shape(const std::string& name) {
  if (name == "linear") return DecayShape::Linear;
  if (name == "1-sqrt") return DecayShape::OneMinusSqrt;
  return DecayShape::Cosine;  // the spec admits only these three
}

}  // namespace

void register_warmup_stable_decay(sdk::Registry& registry) {
  registry.add_scheduler(
      {"warmup_stable_decay", "Warmup, constant, then decay to a floor (transformers `warmup_stable_decay`)",
       wsd_spec()},
      [](const sdk::Options& options, const sdk::SchedulerContext&) -> std::unique_ptr<sdk::Scheduler> {
        WsdOptions o;
        o.warmup = sdk::Warmup::from_options(options);
        if (options.has_value("num_stable_steps")) o.num_stable_steps = options.get_int("num_stable_steps");
        if (options.has_value("num_decay_steps")) o.num_decay_steps = options.get_int("num_decay_steps");
        o.decay_ratio = options.get_float("decay_ratio");
        o.min_lr_ratio = options.get_float("min_lr_ratio");
        o.decay = decay_shape(options.get_string("decay_type"));
        o.num_cycles = options.get_float("num_cycles");
        if (o.warmup.ratio >= 0.0 && !o.num_decay_steps && o.warmup.ratio + o.decay_ratio > 1.0) {
          std::ostringstream message;
          message << "warmup_ratio (" << o.warmup.ratio << ") + decay_ratio (" << o.decay_ratio
                  << ") exceed 1: warmup and decay cannot both fit in the run";
          throw sdk::OptionError(message.str());
        }
        return std::make_unique<WarmupStableDecay>(o);
      });
}

}  // namespace ftcore::plugins::schedulers

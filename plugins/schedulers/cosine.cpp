// scheduler/cosine and scheduler/cosine_with_restarts.
//
// cosine, after warmup (s: 0-based step, T: total, W: warmup steps,
// c: num_cycles, m: cosine_min_lr_ratio or 0):
//   p    = (s - W) / max(1, E - W)          E = T, or C (below) with a constant ratio
//   f(s) = max(0, m + (1 - m) * 0.5 * (1 + cos(2 pi c p)))
// - no ratios: transformers get_cosine_schedule_with_warmup (m = 0 makes the
//   floor term vanish exactly: f * 1 + 0 == f);
// - cosine_min_lr_ratio: transformers get_cosine_with_min_lr_schedule_with_warmup
//   (min_lr_rate = m) and Axolotl's get_cosine_schedule_with_min_lr, which is
//   the same curve at Axolotl's fixed c = 0.5;
// - cosine_constant_lr_ratio r: Axolotl's get_cosine_schedule_with_warmup_decay_constant
//   ("Continual Pre-Training of LLMs: How to (re)warm your model?",
//   https://arxiv.org/abs/2308.04014): the cosine reaches its floor m at
//   step C = floor(r T) and holds it from there (p = 1 for s >= C).
//   Axolotl floors at 0 before adding m, transformers after; since
//   (1 - m)(1 + cos) >= 0 both give the same numbers.
//   Where C <= W ftcore holds m after warmup; Axolotl's formula there divides
//   by a non-positive length and returns arbitrary points of the cosine.
//
// cosine_with_restarts (transformers get_cosine_with_hard_restarts_schedule_with_warmup):
//   p    = (s - W) / max(1, T - W)
//   f(s) = 0 if p >= 1, else max(0, 0.5 * (1 + cos(pi * ((c p) mod 1))))
// c whole half-waves from 1 to 0, each restarting at 1.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numbers>
#include <optional>

#include "warmup_then.h"

namespace ftcore::plugins::schedulers {
namespace {

constexpr double kPi = std::numbers::pi;

class Cosine final : public WarmupThen {
 public:
  Cosine(sdk::Warmup warmup, double num_cycles, double min_ratio, std::optional<double> constant_ratio)
      : WarmupThen(warmup), num_cycles_(num_cycles), min_ratio_(min_ratio), constant_ratio_(constant_ratio) {}

 protected:
  double after_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps) const override {
    int64_t decay_end = total_steps;
    if (constant_ratio_) {
      // int(T * r) as Axolotl computes the step where the floor starts.
      decay_end = static_cast<int64_t>(static_cast<double>(total_steps) * *constant_ratio_);
    }
    const double progress = (constant_ratio_ && step >= decay_end)
                                ? 1.0
                                : static_cast<double>(step - warmup_steps) / at_least_one(decay_end - warmup_steps);
    // Same operation order as transformers (pi * c * 2 * p), so that the
    // factors agree to the last bit where the formulas coincide.
    double f = 0.5 * (1.0 + std::cos(kPi * num_cycles_ * 2.0 * progress));
    f = f * (1.0 - min_ratio_) + min_ratio_;
    return std::max(0.0, f);
  }

 private:
  double num_cycles_;
  double min_ratio_;
  std::optional<double> constant_ratio_;
};

class CosineWithRestarts final : public WarmupThen {
 public:
  CosineWithRestarts(sdk::Warmup warmup, int64_t num_cycles) : WarmupThen(warmup), num_cycles_(num_cycles) {}

 protected:
  double after_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps) const override {
    const double progress = static_cast<double>(step - warmup_steps) / at_least_one(total_steps - warmup_steps);
    if (progress >= 1.0) return 0.0;
    // Python's float % equals fmod for the non-negative operands here.
    const double phase = std::fmod(static_cast<double>(num_cycles_) * progress, 1.0);
    return std::max(0.0, 0.5 * (1.0 + std::cos(kPi * phase)));
  }

 private:
  int64_t num_cycles_;
};

sdk::ParamSpec cosine_spec() {
  sdk::ParamSpec spec;
  sdk::add_warmup_params(spec);
  spec.add_float("num_cycles", 0.5)
      .above(0.0)
      .with_doc("Cosine waves over the decay; 0.5 is one half wave from the base lr down to the floor.");
  spec.add_float("cosine_min_lr_ratio", std::nullopt)
      .with_range(0.0, 1.0)
      .with_doc("Floor of the decay as a fraction of the base lr (Axolotl cosine_min_lr_ratio, "
                "transformers min_lr_rate). Unset: decays to 0.");
  spec.add_float("cosine_constant_lr_ratio", std::nullopt)
      .with_range(0.0, 1.0)
      .with_doc("Fraction of total steps at which the cosine reaches its floor and then stays there "
                "(Axolotl cosine_constant_lr_ratio); the floor is cosine_min_lr_ratio, or 0 when unset.");
  return spec;
}

sdk::ParamSpec restarts_spec() {
  sdk::ParamSpec spec;
  sdk::add_warmup_params(spec);
  spec.add_int("num_cycles", 1).at_least(1).with_doc("Hard restarts: half-cosine waves from the base lr to 0.");
  return spec;
}

}  // namespace

void register_cosine_family(sdk::Registry& registry) {
  registry.add_scheduler(
      {"cosine", "Half-cosine decay after warmup, optional floor and hold (transformers/Axolotl `cosine`)",
       cosine_spec()},
      [](const sdk::Options& options, const sdk::SchedulerContext&) -> std::unique_ptr<sdk::Scheduler> {
        const double min_ratio =
            options.has_value("cosine_min_lr_ratio") ? options.get_float("cosine_min_lr_ratio") : 0.0;
        std::optional<double> constant_ratio;
        if (options.has_value("cosine_constant_lr_ratio"))
          constant_ratio = options.get_float("cosine_constant_lr_ratio");
        return std::make_unique<Cosine>(sdk::Warmup::from_options(options), options.get_float("num_cycles"),
                                        min_ratio, constant_ratio);
      });
  registry.add_scheduler(
      {"cosine_with_restarts", "Cosine decay to 0 with hard restarts (transformers `cosine_with_restarts`)",
       restarts_spec()},
      [](const sdk::Options& options, const sdk::SchedulerContext&) -> std::unique_ptr<sdk::Scheduler> {
        return std::make_unique<CosineWithRestarts>(sdk::Warmup::from_options(options),
                                                    options.get_int("num_cycles"));
      });
}

}  // namespace ftcore::plugins::schedulers

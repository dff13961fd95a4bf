// Shared shape of the warmup-then-decay schedules in this plugin: the first
// W optimizer steps (W resolved from warmup_steps / warmup_ratio against the
// run's total) use the SDK's common warmup ramp, every later step asks the
// schedule's own `after_warmup`. This is the branch every transformers
// get_*_schedule_with_warmup lambda starts with, written once.
//
// Also declares the register functions of the files of this plugin, so that
// plugin.cpp reads as the list of what the library provides.
#pragma once

#include <algorithm>
#include <cstdint>

#include "ftcore/sdk/registry.h"
#include "ftcore/sdk/scheduler.h"

namespace ftcore::plugins::schedulers {

class WarmupThen : public sdk::Scheduler {
 public:
  explicit WarmupThen(sdk::Warmup warmup) : warmup_(warmup) {}

  double factor(int64_t step, int64_t total_steps) const final {
    const int64_t warmup_steps = warmup_.resolve_steps(total_steps);
    if (step < warmup_steps) return warmup_.factor(step, warmup_steps);
    return after_warmup(step, warmup_steps, total_steps);
  }

 protected:
  // Factor for step >= warmup_steps.
  virtual double after_warmup(int64_t step, int64_t warmup_steps, int64_t total_steps) const = 0;

 private:
  sdk::Warmup warmup_;
};

// max(1, n) as a double: every schedule divides by a phase length that a
// recipe may make 0, and transformers guards each such division this way.
inline double at_least_one(int64_t n) { return static_cast<double>(std::max<int64_t>(1, n)); }

// One per source file; plugin.cpp calls them all.
void register_constant_and_linear(sdk::Registry& registry);   // constant_linear.cpp
void register_cosine_family(sdk::Registry& registry);         // cosine.cpp
void register_power_decays(sdk::Registry& registry);          // power_decay.cpp
void register_one_cycle(sdk::Registry& registry);             // one_cycle.cpp
void register_warmup_stable_decay(sdk::Registry& registry);   // warmup_stable_decay.cpp

}  // namespace ftcore::plugins::schedulers

// The scheduler contract: a pure function of the step. `factor(step, total)`
// multiplies the optimizer's base lr for the optimizer step numbered `step`
// (0-based: the first update uses factor(0, total)), the same convention as
// the lambdas of transformers' get_*_schedule_with_warmup.
//
// Warmup is common to every scheduler: `warmup_steps` or `warmup_ratio`
// (mutually exclusive; the ratio resolves to ceil(ratio x total) as
// transformers does) and `warmup_type` linear or quadratic.
#pragma once

#include <cstdint>

#include "ftcore/sdk/params.h"

namespace ftcore::sdk {

// What a scheduler may know beyond its options: the optimizer's base lr, for
// schedules defined with absolute rates (polynomial's lr_end).
struct SchedulerContext {
  double base_lr = 1.0;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual double factor(int64_t step, int64_t total_steps) const = 0;
};

// Declares warmup_steps, warmup_ratio (exclusive) and warmup_type in `spec`.
void add_warmup_params(ParamSpec& spec);

struct Warmup {
  int64_t steps = 0;     // 0 when the recipe asks for no warmup
  double ratio = -1.0;   // >= 0 when given as a ratio
  bool quadratic = false;

  static Warmup from_options(const Options& options);
  int64_t resolve_steps(int64_t total_steps) const;
  // Factor during warmup (step < resolved steps): step/warmup, squared if quadratic.
  double factor(int64_t step, int64_t warmup_steps) const;
};

}  // namespace ftcore::sdk

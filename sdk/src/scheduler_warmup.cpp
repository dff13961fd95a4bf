// Warmup shared by every scheduler (see scheduler.h).
#include <cmath>

#include "ftcore/sdk/scheduler.h"

namespace ftcore::sdk {

void add_warmup_params(ParamSpec& spec) {
  spec.add_int("warmup_steps", std::nullopt).at_least(0).with_doc("Optimizer steps of warmup from 0 to the base lr.");
  spec.add_float("warmup_ratio", std::nullopt)
      .with_range(0.0, 1.0)
      .with_doc("Warmup as a fraction of total steps, rounded up (ceil), as transformers does.");
  spec.add_enum("warmup_type", {"linear", "quadratic"}, "linear")
      .with_doc("Shape of the warmup ramp: step/warmup, or its square.");
  spec.exclusive({"warmup_steps", "warmup_ratio"});
}

Warmup Warmup::from_options(const Options& options) {
  Warmup w;
  if (options.has_value("warmup_steps")) w.steps = options.get_int("warmup_steps");
  if (options.has_value("warmup_ratio")) w.ratio = options.get_float("warmup_ratio");
  w.quadratic = options.get_string("warmup_type") == "quadratic";
  return w;
}

int64_t Warmup::resolve_steps(int64_t total_steps) const {
  if (ratio >= 0.0) return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * ratio));
  return steps;
}

double Warmup::factor(int64_t step, int64_t warmup_steps) const {
  double f = static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps));
  return quadratic ? f * f : f;
}

}  // namespace ftcore::sdk

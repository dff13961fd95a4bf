// optimizer/adafactor: Adafactor as transformers.optimization.Adafactor
// defines it (Shazeer & Stern 2018, https://arxiv.org/abs/1804.04235), with
// its options and defaults, through fused passes over all tensors
// (adafactor_kernel.h has the update rule).
//
// Learning rate. With relative_step (the default) the step size is
// transformers' relative step, min(1e-2, 1/sqrt(t)) (warmup_init: min(1e-6*t,
// 1/sqrt(t))), and `lr` must be unset; the group's lr then acts as a
// multiplier of it that starts at 1.0, so lr_scale and a scheduler still
// apply (transformers ignores both; with lr_scale 1 and a constant schedule
// the two are identical). With relative_step = false, `lr` is required and
// used as transformers uses it. scale_parameter multiplies the step by
// max(eps2, RMS(p)).
//
// State per parameter, fp32 whatever the parameter dtype:
//   step (int64); exp_avg_sq_row [..., M] and exp_avg_sq_col [..., N] for
//   parameters with >= 2 dims (4(M+N) bytes for an M x N matrix), exp_avg_sq
//   for the others; exp_avg when beta1 is set.
// Saved by parameter name as "<name>.step", "<name>.exp_avg_sq_row", ...
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ftcore/sdk/options_with_lr.h"
#include "ftcore/sdk/params.h"
#include "ftcore/sdk/slot_optimizer.h"

namespace ftcore::plugins::adafactor {

struct AdafactorOptions : public sdk::OptionsWithLr<AdafactorOptions> {
  // The group lr: the lr itself without relative_step, a multiplier of the
  // relative step (1.0 before lr_scale and the schedule) with it.
  AdafactorOptions() : OptionsWithLr(1.0) {}
  std::pair<double, double> eps = {1e-30, 1e-3};
  double clip_threshold = 1.0;
  double decay_rate = -0.8;
  std::optional<double> beta1;
  double weight_decay = 0.0;
  bool scale_parameter = true;
  bool relative_step = true;
  bool warmup_init = false;
};

sdk::ParamSpec adafactor_param_spec();
// Throws sdk::OptionError on contradicting options, as transformers raises ValueError.
AdafactorOptions adafactor_options_from(const sdk::Options& options);

class Adafactor : public sdk::SlotOptimizer {
 public:
  Adafactor(const std::vector<sdk::ParamGroupSpec>& groups, const AdafactorOptions& options);

  at::Tensor step(LossClosure closure = nullptr) override;

 private:
  // The relative step size rho of transformers' _get_lr for this group and step.
  double relative_step_size(size_t group, int64_t step) const;

  AdafactorOptions options_;
};

// Shapes of the factored statistics of a parameter: shape[:-1] and shape[:-2] + shape[-1:].
std::vector<int64_t> row_stat_shape(at::IntArrayRef shape);
std::vector<int64_t> col_stat_shape(at::IntArrayRef shape);

}  // namespace ftcore::plugins::adafactor

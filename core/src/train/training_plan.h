// Which micro-batches each optimizer step takes. The sampler is a pure
// function of (epoch, seed), so the plan is too: step k of a resumed run
// takes exactly the micro-batches step k of an uninterrupted run took, and
// the checkpoint's cursor is just the step number (with epoch and batch index
// recorded for people and checked on resume).
//
// An epoch of N micro-batches makes ceil(N / accumulation) steps; its last
// step may take fewer micro-batches (its loss is normalised by its own target
// tokens). Totals count each epoch's own batches, so packing samplers whose
// row count varies per epoch still get the right total. max_steps wins over
// num_epochs; a fractional num_epochs takes ceil(fraction x steps) of the
// last epoch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "ftcore/sdk/sampler.h"

namespace ftcore::train {

struct StepSlice {
  int64_t epoch = 0;
  int64_t first_batch = 0;  // index into the epoch's micro-batches
  int64_t end_batch = 0;    // one past the last
};

class TrainingPlan {
 public:
  TrainingPlan(std::shared_ptr<const sdk::Sampler> sampler, sdk::SamplerInput input, int64_t accumulation,
               double num_epochs, std::optional<int64_t> max_steps);

  int64_t total_steps() const { return total_steps_; }
  // Steps of the first epoch: what evals_per_epoch / saves_per_epoch divide.
  int64_t steps_per_epoch() const { return steps_in_epoch(0); }
  // 0-based optimizer step -> its micro-batches.
  StepSlice slice(int64_t step) const;
  // Epochs done after `steps` steps, fractional (for logs and trainer_state.json).
  double epoch_progress(int64_t steps) const;
  const std::vector<sdk::Batch>& batches(int64_t epoch) const;

 private:
  int64_t steps_in_epoch(int64_t epoch) const;

  std::shared_ptr<const sdk::Sampler> sampler_;
  sdk::SamplerInput input_;
  int64_t accumulation_;
  int64_t total_steps_ = 0;
  mutable std::map<int64_t, std::vector<sdk::Batch>> epochs_;  // computed on first use, a few kept
  mutable std::vector<int64_t> epoch_steps_;                     // steps of epochs 0, 1, ... (all kept)
};

}  // namespace ftcore::train

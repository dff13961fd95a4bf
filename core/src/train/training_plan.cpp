// TrainingPlan: epochs of sampler batches -> optimizer steps.
#include "training_plan.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ftcore::train {

TrainingPlan::TrainingPlan(std::shared_ptr<const sdk::Sampler> sampler, sdk::SamplerInput input,
                           int64_t accumulation, double num_epochs, std::optional<int64_t> max_steps)
    : sampler_(std::move(sampler)), input_(std::move(input)), accumulation_(accumulation) {
  if (steps_in_epoch(0) == 0)
    throw std::invalid_argument("the training set yields no batches (" + std::to_string(input_.lengths.size()) +
                                " examples): nothing to train on");
  if (max_steps) {
    total_steps_ = *max_steps;
    return;
  }
  const auto whole = static_cast<int64_t>(std::floor(num_epochs));
  for (int64_t e = 0; e < whole; ++e) total_steps_ += steps_in_epoch(e);
  const double fraction = num_epochs - static_cast<double>(whole);
  if (fraction > 0.0)
    total_steps_ += static_cast<int64_t>(std::ceil(fraction * static_cast<double>(steps_in_epoch(whole))));
}

const std::vector<sdk::Batch>& TrainingPlan::batches(int64_t epoch) const {
  auto it = epochs_.find(epoch);
  if (it == epochs_.end()) {
    if (epochs_.size() > 4) epochs_.erase(epochs_.begin());  // only nearby epochs are asked for again
    it = epochs_.emplace(epoch, sampler_->batches(input_, epoch)).first;
  }
  return it->second;
}

int64_t TrainingPlan::steps_in_epoch(int64_t epoch) const {
  while (static_cast<int64_t>(epoch_steps_.size()) <= epoch) {
    const auto n = static_cast<int64_t>(batches(static_cast<int64_t>(epoch_steps_.size())).size());
    epoch_steps_.push_back((n + accumulation_ - 1) / accumulation_);
  }
  return epoch_steps_[static_cast<size_t>(epoch)];
}

StepSlice TrainingPlan::slice(int64_t step) const {
  int64_t epoch = 0, first_step = 0;
  while (first_step + steps_in_epoch(epoch) <= step) first_step += steps_in_epoch(epoch++);
  const int64_t in_epoch = step - first_step;
  const auto n = static_cast<int64_t>(batches(epoch).size());
  StepSlice s;
  s.epoch = epoch;
  s.first_batch = in_epoch * accumulation_;
  s.end_batch = std::min(n, s.first_batch + accumulation_);
  return s;
}

double TrainingPlan::epoch_progress(int64_t steps) const {
  int64_t epoch = 0, first_step = 0;
  while (first_step + steps_in_epoch(epoch) <= steps) first_step += steps_in_epoch(epoch++);
  return static_cast<double>(epoch) +
         static_cast<double>(steps - first_step) / static_cast<double>(steps_in_epoch(epoch));
}

}  // namespace ftcore::train

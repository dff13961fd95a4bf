// The base of an optimizer's typed options: libtorch's cloneable options
// (what torch::optim::Optimizer keeps per group) with the learning rate,
// which the trainer sets per group (base lr x lr_scale x the scheduler).
//
//   struct LionOptions : sdk::OptionsWithLr<LionOptions> {
//     LionOptions() : OptionsWithLr(1e-4) {}
//     std::pair<double, double> betas = {0.9, 0.99};
//   };
#pragma once

#include <torch/optim/optimizer.h>

namespace ftcore::sdk {

template <typename Self>
struct OptionsWithLr : public torch::optim::OptimizerCloneableOptions<Self> {
  explicit OptionsWithLr(double default_lr) : lr(default_lr) {}
  double lr;

  double get_lr() const override { return lr; }
  void set_lr(const double value) override { lr = value; }
};

}  // namespace ftcore::sdk

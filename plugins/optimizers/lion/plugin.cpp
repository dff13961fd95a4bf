// Registers optimizer/lion.
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "lion.h"

namespace {

void register_lion(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_optimizer(
      {"lion", "Lion (sign of interpolated momentum, decoupled weight decay), fused multi-tensor CPU kernel",
       plugins::lion::lion_param_spec()},
      [](std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options) -> std::unique_ptr<sdk::Optimizer> {
        return std::make_unique<plugins::lion::Lion>(groups, plugins::lion::lion_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("lion", "1.0.0", "Apache-2.0", register_lion)

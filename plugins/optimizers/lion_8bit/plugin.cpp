// Registers optimizer/lion_8bit.
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "lion_8bit.h"

namespace {

void register_lion_8bit(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_optimizer(
      {"lion_8bit", "Lion with 8-bit blockwise momentum (bitsandbytes Lion8bit), fused multi-tensor CPU kernel, CUDA when built",
       plugins::lion_8bit::lion_8bit_param_spec()},
      [](std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options) -> std::unique_ptr<sdk::Optimizer> {
        return std::make_unique<plugins::lion_8bit::Lion8bit>(groups, plugins::lion_8bit::lion_8bit_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("lion_8bit", "1.0.0", "Apache-2.0", register_lion_8bit)

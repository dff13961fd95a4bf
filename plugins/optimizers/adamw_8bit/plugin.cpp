// Registers optimizer/adamw_8bit.
#include "adamw_8bit.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

void register_adamw_8bit(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_optimizer(
      {"adamw_8bit",
       "AdamW with 8-bit blockwise state (bitsandbytes AdamW8bit), fused multi-tensor CPU kernel, CUDA when built",
       plugins::adamw_8bit::adamw_8bit_param_spec()},
      [](std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options) -> std::unique_ptr<sdk::Optimizer> {
        return std::make_unique<plugins::adamw_8bit::AdamW8bit>(groups,
                                                                 plugins::adamw_8bit::adamw_8bit_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("adamw_8bit", "1.0.0", "Apache-2.0", register_adamw_8bit)

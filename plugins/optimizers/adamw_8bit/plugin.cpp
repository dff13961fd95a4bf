// Registers optimizer/adamw_8bit.
#include "adamw_8bit.h"
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"

namespace ftcore::plugins::adamw_8bit {

static void register_adamw_8bit(sdk::Registry& registry) {
  registry.add_optimizer(
      {"adamw_8bit",
       "AdamW with 8-bit blockwise state (bitsandbytes AdamW8bit), fused multi-tensor CPU kernel, CUDA when built",
       adamw_8bit_param_spec()},
      sdk::optimizer_factory<AdamW8bit>(adamw_8bit_options_from));
}

}  // namespace ftcore::plugins::adamw_8bit

FTCORE_PLUGIN("adamw_8bit", "1.0.0", "Apache-2.0", ftcore::plugins::adamw_8bit::register_adamw_8bit)

// Registers optimizer/lion_8bit.
#include "lion_8bit.h"
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"

namespace ftcore::plugins::lion_8bit {

static void register_lion_8bit(sdk::Registry& registry) {
  registry.add_optimizer(
      {"lion_8bit",
       "Lion with 8-bit blockwise momentum (bitsandbytes Lion8bit), fused multi-tensor CPU kernel, CUDA when built",
       lion_8bit_param_spec()},
      sdk::optimizer_factory<Lion8bit>(lion_8bit_options_from));
}

}  // namespace ftcore::plugins::lion_8bit

FTCORE_PLUGIN("lion_8bit", "1.0.0", "Apache-2.0", ftcore::plugins::lion_8bit::register_lion_8bit)

// Registers optimizer/lion.
#include "lion.h"
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"

namespace ftcore::plugins::lion {

static void register_lion(sdk::Registry& registry) {
  registry.add_optimizer(
      {"lion", "Lion (sign of interpolated momentum, decoupled weight decay), fused multi-tensor CPU kernel",
       lion_param_spec()},
      sdk::optimizer_factory<Lion>(lion_options_from));
}

}  // namespace ftcore::plugins::lion

FTCORE_PLUGIN("lion", "1.0.0", "Apache-2.0", ftcore::plugins::lion::register_lion)

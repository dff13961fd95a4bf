// Registers optimizer/adamw.
#include "adamw.h"
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"

namespace ftcore::plugins::adamw {

static void register_adamw(sdk::Registry& registry) {
  registry.add_optimizer(
      {"adamw", "AdamW (decoupled weight decay, optional AMSGrad), fused multi-tensor CPU kernel", adamw_param_spec()},
      sdk::optimizer_factory<AdamW>(adamw_options_from));
}

}  // namespace ftcore::plugins::adamw

FTCORE_PLUGIN("adamw", "1.0.0", "Apache-2.0", ftcore::plugins::adamw::register_adamw)

// Registers optimizer/adafactor.
#include "adafactor.h"
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"

namespace ftcore::plugins::adafactor {

static void register_adafactor(sdk::Registry& registry) {
  registry.add_optimizer(
      {"adafactor", "Adafactor (factored second moments, relative step, update clipping) as transformers defines it",
       adafactor_param_spec()},
      sdk::optimizer_factory<Adafactor>(adafactor_options_from));
}

}  // namespace ftcore::plugins::adafactor

FTCORE_PLUGIN("adafactor", "1.0.0", "Apache-2.0", ftcore::plugins::adafactor::register_adafactor)

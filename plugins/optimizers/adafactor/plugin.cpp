// Registers optimizer/adafactor.
#include "adafactor.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

void register_adafactor(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_optimizer(
      {"adafactor", "Adafactor (factored second moments, relative step, update clipping) as transformers defines it",
       plugins::adafactor::adafactor_param_spec()},
      [](std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options) -> std::unique_ptr<sdk::Optimizer> {
        return std::make_unique<plugins::adafactor::Adafactor>(groups,
                                                              plugins::adafactor::adafactor_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("adafactor", "1.0.0", "Apache-2.0", register_adafactor)

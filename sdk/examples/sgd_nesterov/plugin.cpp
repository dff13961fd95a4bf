// Registers optimizer/sgd_nesterov: the one exported symbol, ftcore_plugin_info,
// carries the ABI and libtorch versions the loader checks before calling anything.
#include <ftcore/sdk/factories.h>
#include <ftcore/sdk/plugin.h>

#include "sgd_nesterov.h"

namespace {

void register_sgd_nesterov(ftcore::sdk::Registry& registry) {
  registry.add_optimizer(
      {"sgd_nesterov", "SGD with Nesterov momentum, dampening and weight decay (torch.optim.SGD semantics)",
       sgd_nesterov::sgd_nesterov_param_spec()},
      ftcore::sdk::optimizer_factory<sgd_nesterov::SgdNesterov>(sgd_nesterov::sgd_nesterov_options_from));
}

}  // namespace

FTCORE_PLUGIN("sgd_nesterov", "1.0.0", "Apache-2.0", register_sgd_nesterov)

// Registers optimizer/sgd_nesterov: the one exported symbol, ftcore_plugin_info,
// carries the ABI and libtorch versions the loader checks before calling anything.
#include <ftcore/sdk/plugin.h>
#include <ftcore/sdk/registry.h>

#include "sgd_nesterov.h"

namespace {

void register_sgd_nesterov(ftcore::sdk::Registry& registry) {
  registry.add_optimizer(
      {"sgd_nesterov", "SGD with Nesterov momentum, dampening and weight decay (torch.optim.SGD semantics)",
       sgd_nesterov::sgd_nesterov_param_spec()},
      [](std::vector<ftcore::sdk::ParamGroupSpec> groups,
         const ftcore::sdk::Options& options) -> std::unique_ptr<ftcore::sdk::Optimizer> {
        return std::make_unique<sgd_nesterov::SgdNesterov>(groups, sgd_nesterov::sgd_nesterov_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("sgd_nesterov", "1.0.0", "Apache-2.0", register_sgd_nesterov)

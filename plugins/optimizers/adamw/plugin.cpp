// Registers optimizer/adamw.
#include "adamw.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

void register_adamw(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_optimizer(
      {"adamw", "AdamW (decoupled weight decay, optional AMSGrad), fused multi-tensor CPU kernel",
       plugins::adamw::adamw_param_spec()},
      [](std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options) -> std::unique_ptr<sdk::Optimizer> {
        return std::make_unique<plugins::adamw::AdamW>(groups, plugins::adamw::adamw_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("adamw", "1.0.0", "Apache-2.0", register_adamw)

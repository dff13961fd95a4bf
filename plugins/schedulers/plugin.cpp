// The `standard` scheduler library: the learning-rate schedules of
// transformers, torch.optim and Axolotl, one factor(step, total) each.
// See README.md for every schedule's formula.
#include "ftcore/sdk/plugin.h"
#include "warmup_then.h"

namespace {

void register_standard_schedulers(ftcore::sdk::Registry& registry) {
  using namespace ftcore::plugins::schedulers;
  register_constant_and_linear(registry);   // constant, constant_with_warmup, linear
  register_cosine_family(registry);         // cosine, cosine_with_restarts
  register_power_decays(registry);          // polynomial, inverse_sqrt
  register_one_cycle(registry);             // one_cycle
  register_warmup_stable_decay(registry);   // warmup_stable_decay
}

}  // namespace

FTCORE_PLUGIN("standard", "1.0.0", "Apache-2.0", register_standard_schedulers)

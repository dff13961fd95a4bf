// The `standard` sampler library: the orders of PyTorch's DistributedSampler,
// transformers' length grouping, and first-fit-decreasing packing. See
// README.md for each sampler's semantics.
#include "ftcore/sdk/plugin.h"
#include "sampler_steps.h"

namespace {

void register_standard_samplers(ftcore::sdk::Registry& registry) {
  using namespace ftcore::plugins::samplers;
  register_sequential(registry);       // sequential
  register_random(registry);           // random
  register_group_by_length(registry);  // group_by_length
  register_multipack(registry);        // multipack
}

}  // namespace

FTCORE_PLUGIN("standard", "1.0.0", "Apache-2.0", register_standard_samplers)

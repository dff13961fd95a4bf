// sampler/random: torch.utils.data.DistributedSampler(shuffle=True, seed=seed)
// with set_epoch(epoch). The epoch's order is
//   torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
// (drawn here by the same ATen kernel, so the order is bit-identical to
// Python's), padded from its start to a multiple of W and sharded
// padded[r::W]; then micro-batches of batch_size. Every rank draws the same
// permutation, so the shards are disjoint apart from the padding.
#include <vector>

#include "sampler_steps.h"

namespace ftcore::plugins::samplers {
namespace {

std::vector<int64_t> random_order(const sdk::SamplerInput& input, int64_t epoch) {
  return seeded_permutation(static_cast<int64_t>(input.lengths.size()), input.seed, epoch);
}

}  // namespace

void register_random(sdk::Registry& registry) {
  add_example_order_sampler(registry, "random",
                            "A fresh permutation per epoch, like DistributedSampler(shuffle=True, seed=seed)",
                            random_order);
}

}  // namespace ftcore::plugins::samplers

// sampler/random: torch.utils.data.DistributedSampler(shuffle=True, seed=seed)
// with set_epoch(epoch). The epoch's order is
//   torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
// (drawn here by the same ATen kernel, so the order is bit-identical to
// Python's), padded from its start to a multiple of W and sharded
// padded[r::W]; then micro-batches of batch_size. Every rank draws the same
// permutation, so the shards are disjoint apart from the padding.
#include <memory>

#include "sampler_steps.h"

namespace ftcore::plugins::samplers {
namespace {

class RandomOrder final : public sdk::Sampler {
 public:
  explicit RandomOrder(bool drop_last) : drop_last_(drop_last) {}

  std::vector<sdk::Batch> batches(const sdk::SamplerInput& input, int64_t epoch) const override {
    check_sampler_input("random", input, epoch);
    const std::vector<int64_t> order =
        seeded_permutation(static_cast<int64_t>(input.lengths.size()), input.seed, epoch);
    const std::vector<int64_t> share = shard_for_rank(order, input.rank, input.world_size);
    return cut_into_batches(one_example_per_row(share), input.batch_size, drop_last_);
  }

 private:
  bool drop_last_;
};

}  // namespace

void register_random(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  add_drop_last_param(spec);
  registry.add_sampler(
      {"random", "A fresh permutation per epoch, like DistributedSampler(shuffle=True, seed=seed)",
       std::move(spec)},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Sampler> {
        return std::make_unique<RandomOrder>(options.get_bool("drop_last"));
      });
}

}  // namespace ftcore::plugins::samplers

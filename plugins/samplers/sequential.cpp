// sampler/sequential: the examples in dataset order, sharded across ranks as
// torch.utils.data.DistributedSampler(shuffle=False, drop_last=False) does
// (rank r sees examples r, r + W, r + 2W, ..., the order padded from its
// start to a multiple of W), then cut into micro-batches of batch_size.
// The same every epoch; the seed is not used.
#include <memory>
#include <numeric>

#include "sampler_steps.h"

namespace ftcore::plugins::samplers {
namespace {

class Sequential final : public sdk::Sampler {
 public:
  explicit Sequential(bool drop_last) : drop_last_(drop_last) {}

  std::vector<sdk::Batch> batches(const sdk::SamplerInput& input, int64_t epoch) const override {
    check_sampler_input("sequential", input, epoch);
    std::vector<int64_t> order(input.lengths.size());
    std::iota(order.begin(), order.end(), int64_t{0});
    const std::vector<int64_t> share = shard_for_rank(order, input.rank, input.world_size);
    return cut_into_batches(one_example_per_row(share), input.batch_size, drop_last_);
  }

 private:
  bool drop_last_;
};

}  // namespace

void register_sequential(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  add_drop_last_param(spec);
  registry.add_sampler(
      {"sequential", "Dataset order, sharded like DistributedSampler(shuffle=False)", std::move(spec)},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Sampler> {
        return std::make_unique<Sequential>(options.get_bool("drop_last"));
      });
}

}  // namespace ftcore::plugins::samplers

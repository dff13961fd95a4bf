// sampler/sequential: the examples in dataset order, sharded across ranks as
// torch.utils.data.DistributedSampler(shuffle=False, drop_last=False) does
// (rank r sees examples r, r + W, r + 2W, ..., the order padded from its
// start to a multiple of W), then cut into micro-batches of batch_size.
// The same every epoch; the seed is not used.
#include <numeric>
#include <vector>

#include "sampler_steps.h"

namespace ftcore::plugins::samplers {
namespace {

std::vector<int64_t> dataset_order(const sdk::SamplerInput& input, int64_t) {
  std::vector<int64_t> order(input.lengths.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  return order;
}

}  // namespace

void register_sequential(sdk::Registry& registry) {
  add_example_order_sampler(registry, "sequential", "Dataset order, sharded like DistributedSampler(shuffle=False)",
                            dataset_order);
}

}  // namespace ftcore::plugins::samplers

// The shared steps of sampler_steps.h: input checks, the torch-identical
// permutation, DistributedSampler sharding and BatchSampler batching.
#include "sampler_steps.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace ftcore::plugins::samplers {

void check_sampler_input(const char* sampler, const sdk::SamplerInput& input, int64_t epoch) {
  const std::string who = std::string("sampler/") + sampler + ": ";
  if (input.world_size < 1)
    throw std::invalid_argument(who + "world_size must be at least 1, got " + std::to_string(input.world_size));
  if (input.rank < 0 || input.rank >= input.world_size)
    throw std::invalid_argument(who + "rank must lie in [0, " + std::to_string(input.world_size) + "), got " +
                                std::to_string(input.rank));
  if (input.batch_size < 1)
    throw std::invalid_argument(who + "batch_size (rows per micro-batch) must be at least 1, got " +
                                std::to_string(input.batch_size));
  if (epoch < 0) throw std::invalid_argument(who + "epoch must be >= 0, got " + std::to_string(epoch));
  for (size_t i = 0; i < input.lengths.size(); ++i) {
    if (input.lengths[i] < 0)
      throw std::invalid_argument(who + "example " + std::to_string(i) + " has a negative length " +
                                  std::to_string(input.lengths[i]));
  }
}

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  // DistributedSampler calls g.manual_seed(seed + epoch); a CPU generator
  // constructed with a seed is in exactly the state manual_seed leaves.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<uint64_t>(epoch));
  // int64, torch.randperm's default dtype: the kernel is the one Python runs.
  const at::Tensor permutation = at::randperm(n, generator, at::TensorOptions().dtype(at::kLong));
  const int64_t* data = permutation.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + n);
}

std::vector<int64_t> shard_for_rank(const std::vector<int64_t>& order, int64_t rank, int64_t world_size) {
  const int64_t n = static_cast<int64_t>(order.size());
  if (n == 0) return {};
  const int64_t per_rank = (n + world_size - 1) / world_size;  // DistributedSampler.num_samples
  std::vector<int64_t> share;
  share.reserve(static_cast<size_t>(per_rank));
  // Position p of the padded order is order[p mod n]: torch pads with
  // indices[:padding], or with whole repeats when padding exceeds n.
  for (int64_t k = 0; k < per_rank; ++k) share.push_back(order[static_cast<size_t>((rank + k * world_size) % n)]);
  return share;
}

std::vector<sdk::Batch> cut_into_batches(std::vector<std::vector<int64_t>> rows, int64_t batch_size,
                                         bool drop_last) {
  std::vector<sdk::Batch> batches;
  const size_t step = static_cast<size_t>(batch_size);
  for (size_t start = 0; start < rows.size(); start += step) {
    const size_t end = std::min(rows.size(), start + step);
    if (drop_last && end - start < step) break;
    sdk::Batch batch;
    batch.rows.assign(std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(start)),
                      std::make_move_iterator(rows.begin() + static_cast<std::ptrdiff_t>(end)));
    batches.push_back(std::move(batch));
  }
  return batches;
}

std::vector<std::vector<int64_t>> one_example_per_row(const std::vector<int64_t>& examples) {
  std::vector<std::vector<int64_t>> rows;
  rows.reserve(examples.size());
  for (int64_t example : examples) rows.push_back({example});
  return rows;
}

std::vector<sdk::Batch> batches_of_examples(const std::vector<int64_t>& order, const sdk::SamplerInput& input,
                                            bool drop_last) {
  return cut_into_batches(one_example_per_row(shard_for_rank(order, input.rank, input.world_size)), input.batch_size,
                          drop_last);
}

void add_drop_last_param(sdk::ParamSpec& spec) {
  spec.add_bool("drop_last", false)
      .with_doc("Drop each rank's last micro-batch when it has fewer than batch_size rows (DataLoader "
                "drop_last). Ranks always hold the same number of rows, so they drop it together.");
}

void add_drop_last_sampler(sdk::Registry& registry, std::string name, std::string summary,
                           std::function<std::unique_ptr<sdk::Sampler>(bool drop_last)> make) {
  sdk::ParamSpec spec;
  add_drop_last_param(spec);
  registry.add_sampler({std::move(name), std::move(summary), std::move(spec)},
                       [make](const sdk::Options& options) { return make(options.get_bool("drop_last")); });
}

namespace {

class ExampleOrderSampler final : public sdk::Sampler {
 public:
  ExampleOrderSampler(const char* name, EpochOrder order, bool drop_last)
      : name_(name), order_(order), drop_last_(drop_last) {}

  std::vector<sdk::Batch> batches(const sdk::SamplerInput& input, int64_t epoch) const override {
    check_sampler_input(name_, input, epoch);
    return batches_of_examples(order_(input, epoch), input, drop_last_);
  }

 private:
  const char* name_;
  EpochOrder order_;
  bool drop_last_;
};

}  // namespace

void add_example_order_sampler(sdk::Registry& registry, const char* name, std::string summary, EpochOrder order) {
  add_drop_last_sampler(registry, name, std::move(summary), [name, order](bool drop_last) {
    return std::make_unique<ExampleOrderSampler>(name, order, drop_last);
  });
}

}  // namespace ftcore::plugins::samplers

// sampler/multipack: examples packed into rows of at most sequence_len
// tokens by first-fit-decreasing (first_fit_decreasing.h), so that a
// micro-batch of batch_size rows carries little padding; the collator
// restarts position ids per example and masks attention across them.
//
// The packing depends on the lengths only; what changes per epoch is the
// order of the rows: torch.randperm(rows, generator seeded seed + epoch),
// i.e. sampler/random over rows instead of examples. Rows are then padded,
// sharded rows[r::W] and cut into micro-batches as sampler_steps.h
// describes, so every rank gets the same number of batches. Without
// drop_last every example is trained at least once per epoch, and only the
// examples of the (fewer than W) padding rows twice; with it, each rank's
// short last batch is dropped.
//
// Packing efficiency (ftcore/sdk/packing_efficiency.h): example tokens / (rows x
// sequence_len).
#include <memory>
#include <stdexcept>
#include <string>

#include "first_fit_decreasing.h"
#include "sampler_steps.h"

namespace ftcore::plugins::samplers {
namespace {

// An example longer than a row cannot be packed; silently truncating or
// skipping it would change the data, so the user is told which one it is.
void check_every_example_fits(const std::vector<int64_t>& lengths, int64_t sequence_len) {
  int64_t first = -1;
  int64_t too_long = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= sequence_len) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    ++too_long;
  }
  if (first < 0) return;
  throw std::invalid_argument(
      "sampler/multipack: example " + std::to_string(first) + " has " + std::to_string(lengths[first]) +
      " tokens, more than sequence_len = " + std::to_string(sequence_len) + " (" + std::to_string(too_long) +
      " example(s) too long in all); raise sequence_len, or truncate or filter long examples");
}

class Multipack final : public sdk::Sampler {
 public:
  explicit Multipack(bool drop_last) : drop_last_(drop_last) {}

  std::vector<sdk::Batch> batches(const sdk::SamplerInput& input, int64_t epoch) const override {
    check_sampler_input("multipack", input, epoch);
    if (input.sequence_len < 1)
      throw std::invalid_argument("sampler/multipack: sequence_len (tokens per packed row) must be at least 1, got " +
                                  std::to_string(input.sequence_len));
    check_every_example_fits(input.lengths, input.sequence_len);

    const std::vector<std::vector<int64_t>> packed = pack_first_fit_decreasing(input.lengths, input.sequence_len);
    const std::vector<int64_t> order = seeded_permutation(static_cast<int64_t>(packed.size()), input.seed, epoch);
    std::vector<std::vector<int64_t>> rows;
    for (int64_t row : shard_for_rank(order, input.rank, input.world_size)) rows.push_back(packed[row]);
    return cut_into_batches(std::move(rows), input.batch_size, drop_last_);
  }

 private:
  bool drop_last_;
};

}  // namespace

void register_multipack(sdk::Registry& registry) {
  add_drop_last_sampler(
      registry, "multipack",
      "Packs examples into rows of sequence_len tokens (first-fit-decreasing), rows shuffled per epoch",
      [](bool drop_last) { return std::make_unique<Multipack>(drop_last); });
}

}  // namespace ftcore::plugins::samplers

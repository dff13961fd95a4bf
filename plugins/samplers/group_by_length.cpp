// sampler/group_by_length: transformers' DistributedLengthGroupedSampler
// (LengthGroupedSampler on one rank), with the generator seeded seed + epoch
// as that sampler seeds it for each epoch. Examples of similar length share
// a micro-batch, so padding wastes less, with some randomness kept.
//
// The epoch order is get_length_grouped_indices (transformers/trainer_pt_utils.py):
//   perm    = torch.randperm(n, generator seeded seed + epoch)
//   M       = mega_batch_mult x G, where G is the grouping batch size and
//             mega_batch_mult defaults to min(n // (4 G), 50), at least 1
//   chunks  = perm cut into runs of M; each sorted by length, longest first
//             (a stable sort, as Python's sorted(reverse=True): ties keep
//             their permutation order)
//   swap    the first element of chunk 0 with the first element of the
//           chunk holding the longest example (the first such chunk, as
//           torch.argmax picks), so an out-of-memory shows up at step 0
// then padded, sharded padded[r::W] and cut into micro-batches as
// sampler_steps.h describes.
#include <algorithm>
#include <memory>
#include <optional>

#include "sampler_steps.h"

namespace ftcore::plugins::samplers {
namespace {

std::vector<int64_t> length_grouped_order(const std::vector<int64_t>& lengths, int64_t grouping_batch_size,
                                          std::optional<int64_t> mega_batch_mult, uint64_t seed, int64_t epoch) {
  const int64_t n = static_cast<int64_t>(lengths.size());
  if (n == 0) return {};  // transformers fails on an empty dataset (argmax of nothing)
  const int64_t mult =
      mega_batch_mult.value_or(std::max<int64_t>(1, std::min<int64_t>(n / (grouping_batch_size * 4), 50)));
  const int64_t megabatch_size = mult * grouping_batch_size;

  const std::vector<int64_t> permutation = seeded_permutation(n, seed, epoch);
  std::vector<std::vector<int64_t>> megabatches;
  for (int64_t start = 0; start < n; start += megabatch_size) {
    std::vector<int64_t> megabatch(permutation.begin() + start,
                                   permutation.begin() + std::min(n, start + megabatch_size));
    std::stable_sort(megabatch.begin(), megabatch.end(),
                     [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
    megabatches.push_back(std::move(megabatch));
  }

  size_t longest = 0;  // strictly greater: the first maximum wins, as with torch.argmax
  for (size_t i = 1; i < megabatches.size(); ++i)
    if (lengths[megabatches[i][0]] > lengths[megabatches[longest][0]]) longest = i;
  std::swap(megabatches[0][0], megabatches[longest][0]);

  std::vector<int64_t> order;
  order.reserve(lengths.size());
  for (const auto& megabatch : megabatches) order.insert(order.end(), megabatch.begin(), megabatch.end());
  return order;
}

class GroupByLength final : public sdk::Sampler {
 public:
  GroupByLength(bool drop_last, std::optional<int64_t> mega_batch_mult, std::optional<int64_t> grouping_batch_size)
      : drop_last_(drop_last), mega_batch_mult_(mega_batch_mult), grouping_batch_size_(grouping_batch_size) {}

  std::vector<sdk::Batch> batches(const sdk::SamplerInput& input, int64_t epoch) const override {
    check_sampler_input("group_by_length", input, epoch);
    const std::vector<int64_t> order = length_grouped_order(
        input.lengths, grouping_batch_size_.value_or(input.batch_size), mega_batch_mult_, input.seed, epoch);
    return batches_of_examples(order, input, drop_last_);
  }

 private:
  bool drop_last_;
  std::optional<int64_t> mega_batch_mult_;
  std::optional<int64_t> grouping_batch_size_;
};

std::optional<int64_t> optional_int(const sdk::Options& options, const char* key) {
  if (!options.has_value(key)) return std::nullopt;
  return options.get_int(key);
}

}  // namespace

void register_group_by_length(sdk::Registry& registry) {
  sdk::ParamSpec spec;
  add_drop_last_param(spec);
  spec.add_int("mega_batch_mult", std::nullopt)
      .at_least(1)
      .with_doc("Examples are sorted by length within mega-batches of mega_batch_mult x grouping batch size "
                "(transformers' get_length_grouped_indices). Unset: min(n / (4 x grouping batch size), 50), "
                "at least 1, as transformers chooses.");
  spec.add_int("grouping_batch_size", std::nullopt)
      .at_least(1)
      .with_doc("Batch size the length grouping works in. Unset: batch_size (rows per micro-batch). The HF "
                "Trainer groups by per_device_train_batch_size x gradient_accumulation_steps; set this to that "
                "product to reproduce it.");
  registry.add_sampler(
      {"group_by_length",
       "Similar lengths share a micro-batch; transformers' DistributedLengthGroupedSampler (group_by_length)",
       std::move(spec)},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Sampler> {
        return std::make_unique<GroupByLength>(options.get_bool("drop_last"),
                                               optional_int(options, "mega_batch_mult"),
                                               optional_int(options, "grouping_batch_size"));
      });
}

}  // namespace ftcore::plugins::samplers

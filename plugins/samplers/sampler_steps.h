// The steps the samplers of this library are built from, written once so
// that every sampler shards, pads and batches exactly as PyTorch users know
// it from DataLoader(batch_sampler=BatchSampler(DistributedSampler(...))):
//
//   1. an epoch order over units (examples, or packed rows for multipack),
//      random ones from torch.randperm with a generator seeded seed + epoch;
//   2. DistributedSampler(drop_last=False) sharding: the order is padded by
//      repeating it from the start until its length is a multiple of
//      world_size, and rank r takes padded[r::world_size], so every rank
//      gets ceil(n / world_size) units;
//   3. BatchSampler(batch_size, drop_last): consecutive groups of batch_size
//      rows; with drop_last the final short group is dropped. All ranks hold
//      the same number of units, so they get the same number of batches.
//
// Also declares the register functions of the files of this plugin, so that
// plugin.cpp reads as the list of what the library provides.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ftcore/sdk/params.h"
#include "ftcore/sdk/registry.h"
#include "ftcore/sdk/sampler.h"

namespace ftcore::plugins::samplers {

// Refuses what no sampler can serve (rank outside [0, world_size), a
// non-positive batch_size or world_size, a negative epoch or length) with a
// sentence that starts with `sampler` and names the value.
void check_sampler_input(const char* sampler, const sdk::SamplerInput& input, int64_t epoch);

// torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist(),
// bit for bit: the same ATen kernel drawing from the same mt19937 state.
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed, int64_t epoch);

// Step 2 above: this rank's share of `order`, padded as DistributedSampler pads.
std::vector<int64_t> shard_for_rank(const std::vector<int64_t>& order, int64_t rank, int64_t world_size);

// Step 3 above: rows grouped into micro-batches of batch_size.
std::vector<sdk::Batch> cut_into_batches(std::vector<std::vector<int64_t>> rows, int64_t batch_size,
                                         bool drop_last);

// One example per row, for the samplers that do not pack.
std::vector<std::vector<int64_t>> one_example_per_row(const std::vector<int64_t>& examples);

// Steps 2 and 3 for the samplers that do not pack: this rank's share of the
// epoch's example order, one example per row, in micro-batches.
std::vector<sdk::Batch> batches_of_examples(const std::vector<int64_t>& order, const sdk::SamplerInput& input,
                                            bool drop_last);

// The `drop_last` key every sampler of this library declares.
void add_drop_last_param(sdk::ParamSpec& spec);

// Registers a sampler whose only key is drop_last, built by make(drop_last).
void add_drop_last_sampler(sdk::Registry& registry, std::string name, std::string summary,
                           std::function<std::unique_ptr<sdk::Sampler>(bool drop_last)> make);

// The order of a sampler that does not pack (sequential, random): the
// example indices of one epoch, before sharding.
using EpochOrder = std::vector<int64_t> (*)(const sdk::SamplerInput& input, int64_t epoch);
// Registers such a sampler: check_sampler_input, then `order`, then
// batches_of_examples.
void add_example_order_sampler(sdk::Registry& registry, const char* name, std::string summary, EpochOrder order);

// One per source file; plugin.cpp calls them all.
void register_sequential(sdk::Registry& registry);       // sequential.cpp
void register_random(sdk::Registry& registry);           // random_order.cpp
void register_group_by_length(sdk::Registry& registry);  // group_by_length.cpp
void register_multipack(sdk::Registry& registry);        // multipack.cpp

}  // namespace ftcore::plugins::samplers

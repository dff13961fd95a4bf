// The sampler contract: from example lengths, epoch, seed, rank and world
// size, the micro-batches this rank sees in an epoch. A micro-batch is a list
// of rows; a row is a list of example indices. Non-packing samplers put one
// example in each row; a packing sampler fills each row with examples whose
// lengths sum to at most sequence_len (the collator then restarts position
// ids per example and masks attention across them).
//
// Samplers are deterministic in (input, epoch): the trainer's cursor
// (epoch, batch index) is all a checkpoint needs for a resumed run to see
// exactly the batches it would have seen. Every rank gets the same number of
// batches, so distributed steps stay in lockstep.
#pragma once

#include <cstdint>
#include <vector>

namespace ftcore::sdk {

struct SamplerInput {
  std::vector<int64_t> lengths;  // tokens per example
  int64_t batch_size = 1;        // rows per micro-batch
  int64_t sequence_len = 0;      // token budget of a packed row
  uint64_t seed = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
};

struct Batch {
  std::vector<std::vector<int64_t>> rows;
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<Batch> batches(const SamplerInput& input, int64_t epoch) const = 0;
};

}  // namespace ftcore::sdk

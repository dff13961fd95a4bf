// The sampler contract: from example lengths, epoch, seed, rank and world
// size, the batches (lists of example indices) this rank sees in an epoch. A
// packing sampler returns bins whose lengths fill sequence_len. Samplers are
// deterministic in (input, epoch): the trainer's cursor (epoch, batch index)
// is all a checkpoint needs for a resumed run to see exactly the batches it
// would have seen.
#pragma once

#include <cstdint>
#include <vector>

namespace ftcore::sdk {

struct SamplerInput {
  std::vector<int64_t> lengths;  // tokens per example
  int64_t batch_size = 1;        // examples (or bins) per micro-batch
  int64_t sequence_len = 0;      // packing budget per row
  uint64_t seed = 0;
  int64_t rank = 0;
  int64_t world_size = 1;
};

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<std::vector<int64_t>> batches(const SamplerInput& input, int64_t epoch) const = 0;
};

}  // namespace ftcore::sdk

// train.seed feeds separate, named random-number streams, so that changing
// one component never shifts the random numbers another one draws (common
// random numbers for `ftcore ab`: two arms with the same seed differ only by
// the component under test):
//
//   split    the train/validation split: std::mt19937_64(seed) in prepare_data
//   data     the order and batches: the sampler's own generator (seed + epoch)
//   init     adapter initialisation: the CPU generator, seeded with `seed`
//            just before the model is built
//   dropout  dropout masks and NEFTune noise: the CPU generator, re-seeded with
//            stream_seed(seed, "dropout") just before the first step, so an
//            adapter that draws more (or fewer) numbers at init leaves the
//            dropout stream as it was
//
// A resumed run restores the generator's state from its checkpoint instead.
#pragma once

#include <cstdint>
#include <string_view>

namespace ftcore::train {

// SplitMix64 of seed XOR FNV-1a(name): independent, reproducible stream seeds.
inline uint64_t stream_seed(uint64_t seed, std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  uint64_t z = seed ^ h;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace ftcore::train

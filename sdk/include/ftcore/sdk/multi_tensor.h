// Running an elementwise optimizer kernel over every tensor of a step in one
// parallel pass: each tensor is cut into chunks of at most kChunkElements,
// chunks from all tensors go to sdk::parallel_for together (small LoRA
// tensors share threads, large ones split), and each chunk runs the widest
// ISA variant of the kernel this CPU supports (sdk/cpu_isa.h).
//
// A kernel provides, per ISA, a struct of chunk functions by parameter dtype:
//   struct Kernels { void (*f32)(const Work&, int64_t, int64_t); ... bf16, f16; };
// and a Work type with `numel` and `dtype` members describing one tensor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "ftcore/sdk/cpu_isa.h"
#include "ftcore/sdk/parallel.h"

namespace ftcore::sdk {

// Large enough that scheduling costs little, small enough to balance threads
// and keep each chunk's streams in L2 (64K elements x 3-4 streams).
inline constexpr int64_t kChunkElements = 1 << 16;
// Below this many elements in a step, waking threads costs more than it saves.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// The variant for this CPU, chosen once per process and kernel type.
template <typename Kernels>
const Kernels& kernels_for_this_cpu(Kernels (*generic)(), Kernels (*avx2)(), Kernels (*avx512)()) {
  static const Kernels chosen = [&] {
    switch (detect_cpu_isa()) {
      case CpuIsa::Avx512: return avx512();
      case CpuIsa::Avx2: return avx2();
      default: return generic();
    }
  }();
  return chosen;
}

template <typename Work, typename Kernels>
void run_multi_tensor(const std::vector<Work>& tensors, const Kernels& kernels, const char* optimizer) {
  using ChunkFn = void (*)(const Work&, int64_t, int64_t);
  struct Chunk {
    const Work* tensor;
    ChunkFn run;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  int64_t total = 0;
  for (const Work& t : tensors) {
    ChunkFn run = t.dtype == c10::kFloat      ? kernels.f32
                  : t.dtype == c10::kBFloat16 ? kernels.bf16
                  : t.dtype == c10::kHalf     ? kernels.f16
                                              : nullptr;
    if (!run) throw std::invalid_argument(std::string(optimizer) + ": unsupported parameter dtype " + c10::toString(t.dtype));
    for (int64_t b = 0; b < t.numel; b += kChunkElements)
      chunks.push_back({&t, run, b, std::min(t.numel, b + kChunkElements)});
    total += t.numel;
  }
  if (total < kParallelThreshold || chunks.size() == 1) {
    for (const Chunk& c : chunks) c.run(*c.tensor, c.begin, c.end);
    return;
  }
  parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) chunks[i].run(*chunks[i].tensor, chunks[i].begin, chunks[i].end);
  });
}

}  // namespace ftcore::sdk

// Multi-tensor scheduling of the AdamW update: chunks across all tensors,
// at::parallel_for over chunks, the ISA variant picked once per process.
#include "adamw_kernel.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include "ftcore/sdk/cpu_isa.h"

namespace ftcore::plugins::adamw {

namespace {

// Large enough that scheduling costs little, small enough to balance threads
// and stay in L2 (64K floats x 3 streams = 768 KiB).
constexpr int64_t kChunkElements = 1 << 16;

const ChunkKernels& kernels_for_this_cpu() {
  static const ChunkKernels kernels = [] {
    switch (sdk::detect_cpu_isa()) {
      case sdk::CpuIsa::Avx512: return avx512_kernels();
      case sdk::CpuIsa::Avx2: return avx2_kernels();
      default: return generic_kernels();
    }
  }();
  return kernels;
}

struct Chunk {
  const AdamWTensor* tensor;
  ChunkUpdate update;
  int64_t begin, end;
};

}  // namespace

void fused_adamw_step(const std::vector<AdamWTensor>& tensors) {
  const ChunkKernels& k = kernels_for_this_cpu();
  std::vector<Chunk> chunks;
  int64_t total = 0;
  for (const auto& t : tensors) {
    ChunkUpdate update = t.dtype == c10::kFloat      ? k.f32
                         : t.dtype == c10::kBFloat16 ? k.bf16
                         : t.dtype == c10::kHalf     ? k.f16
                                                     : nullptr;
    TORCH_CHECK(update, "adamw: unsupported parameter dtype ", t.dtype);
    for (int64_t b = 0; b < t.numel; b += kChunkElements)
      chunks.push_back({&t, update, b, std::min(t.numel, b + kChunkElements)});
    total += t.numel;
  }
  // Small steps (a few LoRA tensors) run inline: thread wake-up would cost more.
  if (total < (1 << 15) || chunks.size() == 1) {
    for (const auto& c : chunks) c.update(*c.tensor, c.begin, c.end);
    return;
  }
  at::parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) chunks[i].update(*chunks[i].tensor, chunks[i].begin, chunks[i].end);
  });
}

}  // namespace ftcore::plugins::adamw

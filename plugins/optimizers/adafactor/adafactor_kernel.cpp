// Multi-tensor scheduling of the Adafactor passes (adafactor_kernel.h): row
// chunks across all tensors, sdk::parallel_for over chunks, the small
// per-tensor statistics in between, the ISA variant picked once per process.
#include "adafactor_kernel.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <cmath>

#include "ftcore/sdk/cpu_isa.h"
#include "ftcore/sdk/parallel.h"

namespace ftcore::plugins::adafactor {

namespace {

// Large enough that scheduling costs little, small enough to balance threads.
constexpr int64_t kChunkElements = 1 << 16;
// Each chunk of a factored tensor keeps its own column sums (N doubles); at
// least 32 rows per chunk keeps them under 1/16 of the parameter's bytes.
constexpr int64_t kMinChunkRows = 32;

const IsaKernels& kernels_for_this_cpu() {
  static const IsaKernels kernels = [] {
    switch (sdk::detect_cpu_isa()) {
      case sdk::CpuIsa::Avx512: return avx512_kernels();
      case sdk::CpuIsa::Avx2: return avx2_kernels();
      default: return generic_kernels();
    }
  }();
  return kernels;
}

struct TensorWork {
  const AdafactorTensor* t = nullptr;
  const ChunkKernels* k = nullptr;
  size_t first_chunk = 0, num_chunks = 0;
  std::vector<double> col_partials;  // per chunk: [matrices spanned, N]
  std::vector<float> row_factor;     // [B*M]: pass 1 writes G's row means here
  std::vector<float> col_factor;     // [B*N]
  ApplyScalars apply{};
};

struct Chunk {
  TensorWork* work;
  int64_t begin, end;
  ChunkStats stats;
};

// RMS from a sum of squares, rounded as tensor.norm(2) / numel**0.5 in fp32.
float rms_from(double sum_sq, int64_t numel) {
  return static_cast<float>(std::sqrt(sum_sq)) / static_cast<float>(std::sqrt(static_cast<double>(numel)));
}

void add_chunks(TensorWork& w, std::vector<Chunk>& chunks) {
  const AdafactorTensor& t = *w.t;
  w.first_chunk = chunks.size();
  if (!t.factored) {
    for (int64_t b = 0; b < t.numel; b += kChunkElements)
      chunks.push_back({&w, b, std::min(t.numel, b + kChunkElements), {}});
  } else {
    const int64_t M = t.rows, total_rows = t.matrices * t.rows;
    const int64_t rows_per_chunk = std::max(kMinChunkRows, kChunkElements / t.cols);
    // Whole matrices per chunk when they are small, slices of one matrix when large.
    const int64_t step = rows_per_chunk >= M ? rows_per_chunk / M * M : rows_per_chunk;
    size_t offset = 0;
    for (int64_t b = 0; b < total_rows;) {
      const int64_t matrix_end = (b / M + 1) * M;
      const int64_t e = step >= M ? std::min(total_rows, b + step) : std::min(matrix_end, b + step);
      chunks.push_back({&w, b, e, {}});
      offset += static_cast<size_t>(((e - 1) / M - b / M + 1) * t.cols);
      b = e;
    }
    w.col_partials.assign(offset, 0.0);
    w.row_factor.resize(static_cast<size_t>(total_rows));
    w.col_factor.resize(static_cast<size_t>(t.matrices * t.cols));
    offset = 0;
    for (size_t c = w.first_chunk; c < chunks.size(); ++c) {
      chunks[c].stats.col_sums = w.col_partials.data() + offset;
      offset += static_cast<size_t>(((chunks[c].end - 1) / M - chunks[c].begin / M + 1) * t.cols);
    }
  }
  w.num_chunks = chunks.size() - w.first_chunk;
}

template <typename F>
void for_each_parallel(int64_t n, bool parallel, F&& f) {
  if (!parallel) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  sdk::parallel_for(0, n, 1, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) f(i);
  });
}

// Pass 2: lr from RMS(p); for factored tensors the new R and C and the rsqrt
// factors, each operation rounded in fp32 as transformers' torch ops are.
void finish_statistics(TensorWork& w, const std::vector<Chunk>& chunks) {
  const AdafactorTensor& t = *w.t;
  const AdafactorStepConfig& c = t.config;
  double sum_p2 = 0.0;
  for (size_t i = 0; i < w.num_chunks; ++i) sum_p2 += chunks[w.first_chunk + i].stats.sum_p2;
  const float rms_p = rms_from(sum_p2, t.numel);
  if (c.scale_parameter && rms_p > static_cast<float>(c.eps2)) {
    // max(eps2, RMS) is then the fp32 RMS tensor, so lr is an fp32 product.
    w.apply.lr = rms_p * static_cast<float>(c.relative_step_size);
    w.apply.decay_alpha = static_cast<float>(-c.weight_decay) * w.apply.lr;
  } else {
    // A Python float: computed in double, rounded where it meets a tensor.
    const double lr = (c.scale_parameter ? c.eps2 : 1.0) * c.relative_step_size;
    w.apply.lr = static_cast<float>(lr);
    w.apply.decay_alpha = static_cast<float>(-c.weight_decay * lr);
  }
  if (!t.factored) return;

  const int64_t B = t.matrices, M = t.rows, N = t.cols;
  std::vector<double> col_sums(static_cast<size_t>(B * N), 0.0);
  for (size_t i = 0; i < w.num_chunks; ++i) {  // in chunk order: the same bits on every run
    const Chunk& ch = chunks[w.first_chunk + i];
    const int64_t first = ch.begin / M, span = (ch.end - 1) / M - first + 1;
    for (int64_t j = 0; j < span * N; ++j) col_sums[static_cast<size_t>(first * N + j)] += ch.stats.col_sums[j];
  }
  for (int64_t b = 0; b < B; ++b) {
    float* R = t.exp_avg_sq_row + b * M;
    float* C = t.exp_avg_sq_col + b * N;
    float* row_factor = w.row_factor.data() + b * M;  // holds G's row means until overwritten below
    float* col_factor = w.col_factor.data() + b * N;
    double sum_r = 0.0;
    for (int64_t i = 0; i < M; ++i) {
      R[i] = std::fma(row_factor[i], c.one_minus_beta2t, R[i] * c.beta2t);
      sum_r += R[i];
    }
    for (int64_t j = 0; j < N; ++j) {
      const float col_mean = static_cast<float>(col_sums[static_cast<size_t>(b * N + j)]) / static_cast<float>(M);
      C[j] = std::fma(col_mean, c.one_minus_beta2t, C[j] * c.beta2t);
      col_factor[j] = 1.0f / std::sqrt(C[j]);
    }
    const float mean_r = static_cast<float>(sum_r) / static_cast<float>(M);
    for (int64_t i = 0; i < M; ++i) row_factor[i] = 1.0f / std::sqrt(R[i] / mean_r);
  }
  w.apply.row_factor = w.row_factor.data();
  w.apply.col_factor = w.col_factor.data();
}

// After pass 3: u is divided by max(1, RMS(u) / clip_threshold), in fp32.
void set_clip_divisor(TensorWork& w, double sum_u2) {
  const float ratio = rms_from(sum_u2, w.t->numel) / static_cast<float>(w.t->config.clip_threshold);
  w.apply.clip_divisor = ratio < 1.0f ? 1.0f : ratio;  // clamp_(min=1): NaN stays NaN
}

}  // namespace

void fused_adafactor_step(const std::vector<AdafactorTensor>& tensors) {
  const IsaKernels& isa = kernels_for_this_cpu();
  std::vector<TensorWork> works;
  works.reserve(tensors.size());
  std::vector<Chunk> chunks;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (t.numel == 0) continue;
    const ChunkKernels* k = t.dtype == c10::kFloat      ? &isa.f32
                            : t.dtype == c10::kBFloat16 ? &isa.bf16
                            : t.dtype == c10::kHalf     ? &isa.f16
                                                        : nullptr;
    if (!k) throw std::invalid_argument(std::string("adafactor: unsupported dtype ") + c10::toString(t.dtype));
    works.push_back({&t, k});
    add_chunks(works.back(), chunks);
    total += t.numel;
  }
  // Small steps (a few LoRA tensors) run inline: waking threads would cost more.
  const bool parallel = total >= (1 << 15) && chunks.size() > 1;
  const auto num_chunks = static_cast<int64_t>(chunks.size());
  const auto num_works = static_cast<int64_t>(works.size());

  for_each_parallel(num_chunks, parallel, [&](int64_t i) {  // pass 1
    Chunk& ch = chunks[i];
    const TensorWork& w = *ch.work;
    if (w.t->factored) w.k->factored_stats(*w.t, ch.begin, ch.end, ch.stats, ch.work->row_factor.data());
    else w.k->unfactored_stats(*w.t, ch.begin, ch.end, ch.stats);
  });
  for_each_parallel(num_works, parallel, [&](int64_t i) { finish_statistics(works[i], chunks); });  // pass 2
  for_each_parallel(num_chunks, parallel, [&](int64_t i) {  // pass 3
    Chunk& ch = chunks[i];
    const TensorWork& w = *ch.work;
    if (w.t->factored) ch.stats.sum_u2 = w.k->factored_update_sq(*w.t, ch.begin, ch.end, w.apply);
  });
  for (auto& w : works) {
    double sum_u2 = 0.0;
    for (size_t i = 0; i < w.num_chunks; ++i) sum_u2 += chunks[w.first_chunk + i].stats.sum_u2;
    set_clip_divisor(w, sum_u2);
  }
  for_each_parallel(num_chunks, parallel, [&](int64_t i) {  // pass 4
    const Chunk& ch = chunks[i];
    const TensorWork& w = *ch.work;
    if (w.t->factored) w.k->factored_apply(*w.t, ch.begin, ch.end, w.apply);
    else w.k->unfactored_apply(*w.t, ch.begin, ch.end, w.apply);
  });
}

}  // namespace ftcore::plugins::adafactor

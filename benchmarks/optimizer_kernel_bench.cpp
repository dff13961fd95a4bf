// optimizer_kernel_bench: the AdamW and 8-bit AdamW chunk kernels alone, for
// each ISA variant the CPU runs: the fastest of many steps over one fp32
// tensor (no plugin, no scheduler), so the noise of a shared machine mostly
// drops out. 65536 elements (one scheduler chunk) stay in L2; 16M do not. With
// --threads N each of N threads steps one contiguous part in 65536-element
// chunks, as sdk::run_multi_tensor splits a step (threads started per step,
// where the scheduler's stay: about 10 us more per step). Prints one JSON line per
// size and variant: {"numel", "threads", "isa", "adamw_ns_per_element",
// "adamw_8bit_ns_per_element", "ratio"} (ns per element of wall time).
//
//   optimizer_kernel_bench [--numel N] [--reps R] [--threads N]
//
// The 8-bit state starts as the blockwise quantization of three steps'
// moments, so its blocks' absmax values are those of a run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "adamw_kernel.h"
#include "blockwise8.h"
#include "ftcore/sdk/cpu_isa.h"
#include "optim8bit_kernel.h"

namespace b8 = ftcore::plugins::blockwise8;
namespace aw = ftcore::plugins::adamw;

namespace {

// Elements [0, n) in 65536-element chunks, split into `threads` contiguous
// parts; one thread runs them on the caller's thread (no thread start timed).
template <typename F>
void in_parts(int64_t n, int threads, F&& chunk) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  if (threads == 1) {
    for (int64_t b = 0; b < n; b += kChunk) chunk(b, std::min(n, b + kChunk));
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk, per = (chunks + threads - 1) / threads * kChunk;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i)
    pool.emplace_back([&, i] {
      for (int64_t b = per * i; b < std::min(n, per * (i + 1)); b += kChunk) chunk(b, std::min(n, b + kChunk));
    });
  for (std::thread& t : pool) t.join();
}

template <typename F>
double fastest_ns(F&& call, int reps) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    best = std::min(best, std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void measure(int64_t n, int reps, int threads, const std::string& isa, const aw::ChunkKernels& adamw, const b8::Optim8bitKernels& eight) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> p(n), g(n), m(n, 0.0f), v(n, 0.0f);
  for (float& x : p) x = normal(rng);
  for (float& x : g) x = normal(rng) * 1e-3f;
  std::vector<float> p8 = p;
  aw::AdamWTensor a{p.data(), g.data(), m.data(), v.data(), nullptr, n, c10::kFloat,
                    aw::adamw_scalars(1e-4, 0.0, {0.9, 0.999}, 1e-8, 4)};
  for (int s = 0; s < 3; ++s) adamw.f32(a, 0, n);
  std::vector<uint8_t> s1(n), s2(n);
  std::vector<float> a1(b8::num_blocks(n, b8::kStateBlock)), a2(a1.size());
  eight.quantize_state(m.data(), n, true, s1.data(), a1.data());
  eight.quantize_state(v.data(), n, false, s2.data(), a2.data());
  b8::Adam8bitTensor e{p8.data(), g.data(), n, c10::kFloat, s1.data(), s2.data(), a1.data(), a2.data()};
  e.scalars = b8::adam8bit_scalars(1e-4, 0.9, 0.999, 1e-8, 0.0, 4, 1.0f);
  double t32 = 1e300, t8 = 1e300;
  for (int round = 0; round < 5; ++round) {  // alternated, so drift hits both
    t32 = std::min(t32, fastest_ns([&] { in_parts(n, threads, [&](int64_t b, int64_t x) { adamw.f32(a, b, x); }); }, reps));
    t8 = std::min(t8, fastest_ns([&] { in_parts(n, threads, [&](int64_t b, int64_t x) { eight.adam.f32(e, b, x); }); }, reps));
  }
  std::printf("%s\n", nlohmann::json{{"numel", n},
                                     {"threads", threads},
                                     {"isa", isa},
                                     {"adamw_ns_per_element", t32 / n},
                                     {"adamw_8bit_ns_per_element", t8 / n},
                                     {"ratio", t8 / t32}}
                          .dump()
                          .c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> sizes = {int64_t{1} << 16, int64_t{1} << 24};
  int reps = 0, threads = 1;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 == argc) {
      std::fprintf(stderr, "optimizer_kernel_bench: %s needs a value\n", k.c_str());
      return 2;
    }
    if (k != "--numel" && k != "--reps" && k != "--threads") {
      std::fprintf(stderr, "optimizer_kernel_bench: unknown argument %s\n", k.c_str());
      return 2;
    }
    // A value that is not a positive integer is a usage error (exit 2), not an uncaught exception.
    int64_t value = 0;
    try {
      size_t used = 0;
      value = std::stoll(argv[i + 1], &used);
      if (used != std::strlen(argv[i + 1]) || value < 1) throw std::invalid_argument("not positive");
    } catch (const std::exception&) {
      std::fprintf(stderr, "optimizer_kernel_bench: %s needs a positive integer, got '%s'\n", k.c_str(), argv[i + 1]);
      return 2;
    }
    if (k == "--numel") sizes = {value};
    else if (k == "--reps") reps = static_cast<int>(std::min<int64_t>(value, 1 << 30));
    else threads = static_cast<int>(std::min<int64_t>(value, 1024));
  }
  const ftcore::sdk::CpuIsa best = ftcore::sdk::detect_cpu_isa();
  for (int64_t n : sizes) {
    const int r = reps > 0 ? reps : (n <= (int64_t{1} << 18) ? 100 : 4);
    if (best >= ftcore::sdk::CpuIsa::Avx512) {
      measure(n, r, threads, "avx512", aw::avx512_kernels(), b8::avx512_kernels());
      if (ftcore::sdk::cpu_has_avx512_vbmi()) measure(n, r, threads, "avx512vbmi", aw::avx512_kernels(), b8::avx512vbmi_kernels());
    }
    if (best >= ftcore::sdk::CpuIsa::Avx2) measure(n, r, threads, "avx2", aw::avx2_kernels(), b8::avx2_kernels());
  }
  return 0;
}

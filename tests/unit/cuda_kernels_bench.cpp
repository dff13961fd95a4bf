// `cuda_kernels_test --benchmark [--elements N]`: bandwidth of the 8-bit
// optimizer steps and the dequantization kernels against a device-to-device
// cudaMemcpy measured in the same run (effective GB/s = bytes each kernel must
// read and write / median time of 20 launches after 3 warm-ups). Needs a GPU;
// exits 77 without one. Numbers and the command go to docs/benchmarks.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "cuda_kernels.h"
#include "cuda_kernels_test_support.h"

namespace ftcore::cuda_test {
namespace {

// Median milliseconds of `reps` runs of `launch` after `warmup` runs.
double median_ms(const std::function<void()>& launch, int warmup = 3, int reps = 20) {
  for (int i = 0; i < warmup; ++i) launch();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    launch();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {  // xorshift64*
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    out[i] = static_cast<uint8_t>((x * 0x2545F4914F6CDD1Dull) >> 56);
  }
  return out;
}

struct Row {
  std::string name;
  double ms, bytes;
};

}  // namespace

int run_benchmark(int argc, char** argv) {
  int64_t n = int64_t{1} << 28;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--elements") n = std::atoll(argv[i + 1]);
  if (!ftcore::cuda::device_available()) {
    std::printf("no CUDA device: nothing to measure\n");
    return 77;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const int64_t blocks = (n + 255) / 256;

  // Inputs made on the device by the dequantization kernels from random codes.
  const std::vector<uint8_t> codes = random_bytes(size_t(n), 1);
  std::vector<float> map(256), map2(256), code16(16);  // signed and unsigned sorted maps
  for (int i = 0; i < 256; ++i) map[i] = (float(i) - 127.5f) / 127.5f, map2[i] = float(i) / 255.0f;
  for (int i = 0; i < 16; ++i) code16[i] = (float(i) - 7.5f) / 7.5f;
  DeviceBuffer d_codes1 = DeviceBuffer::upload(codes, 0), d_codes2 = DeviceBuffer::upload(random_bytes(size_t(n), 2), 0);
  DeviceBuffer d_map = DeviceBuffer::upload(map, 0), d_map2 = DeviceBuffer::upload(map2, 0),
               d_code16 = DeviceBuffer::upload(code16, 0);
  std::vector<float> absmax_host(size_t(blocks), 1e-3f);
  DeviceBuffer d_absmax1 = DeviceBuffer::upload(absmax_host, 0), d_absmax2 = DeviceBuffer::upload(absmax_host, 0);
  const std::vector<float> scale_host(size_t(n / 64 + 1), 1e-3f);  // enough for 4-bit blocks of 64
  DeviceBuffer d_scale = DeviceBuffer::upload(scale_host, 0);
  DeviceBuffer param(size_t(n) * 4, 0), grad(size_t(n) * 4, 0), copy_dst(size_t(n) * 4, 0);
  DeviceBuffer state1(size_t(n), 0), state2(size_t(n), 0);

  std::vector<Row> rows;
  rows.push_back({"cudaMemcpy D2D (f32 buffer)", median_ms([&] {
                    check(cudaMemcpyAsync(copy_dst.get(), param.get(), size_t(n) * 4, cudaMemcpyDeviceToDevice),
                          "cudaMemcpyAsync");
                  }),
                  2.0 * 4 * double(n)});
  for (DType dtype : {DType::F32, DType::BF16}) {
    const double es = double(dtype_size(dtype));
    if (dtype == DType::F32) {
      ftcore::cuda::dequantize_blockwise_8bit(d_codes1.get<uint8_t>(), d_scale.get<float>(), d_map.get<float>(), n, 256,
                                              0.0f, param.get<float>(), nullptr);
      ftcore::cuda::dequantize_blockwise_8bit(d_codes2.get<uint8_t>(), d_scale.get<float>(), d_map.get<float>(), n, 256,
                                              0.0f, grad.get<float>(), nullptr);
    } else {
      ftcore::cuda::dequantize_4bit(d_codes1.get<uint8_t>(), d_scale.get<float>(), d_code16.get<float>(), n, 1024,
                                    param.get(), dtype, nullptr);
      ftcore::cuda::dequantize_4bit(d_codes2.get<uint8_t>(), d_scale.get<float>(), d_code16.get<float>(), n, 1024,
                                    grad.get(), dtype, nullptr);
    }
    check(cudaMemcpy(state1.get(), d_codes1.get(), size_t(n), cudaMemcpyDeviceToDevice), "cudaMemcpy");
    check(cudaMemcpy(state2.get(), d_codes2.get(), size_t(n), cudaMemcpyDeviceToDevice), "cudaMemcpy");
    ftcore::cuda::Adam8bitArgs adam;
    adam.param = param.get(), adam.grad = grad.get(), adam.dtype = dtype, adam.numel = n;
    adam.state1 = state1.get<uint8_t>(), adam.state2 = state2.get<uint8_t>();
    adam.absmax1 = d_absmax1.get<float>(), adam.absmax2 = d_absmax2.get<float>();
    adam.qmap1 = d_map.get<float>(), adam.qmap2 = d_map2.get<float>();
    adam.weight_decay = 0.01f, adam.bias_correction1 = 0.1f, adam.bias_correction2 = 0.001f;
    // param r+w, grad r, two states r+w, two absmax r+w
    const double adam_bytes = double(n) * (3 * es + 4) + double(blocks) * 16;
    rows.push_back({std::string("adam8bit_blockwise_step ") + dtype_label(dtype),
                    median_ms([&] { ftcore::cuda::adam8bit_blockwise_step(adam, nullptr); }), adam_bytes});
    ftcore::cuda::Lion8bitArgs lion;
    lion.param = param.get(), lion.grad = grad.get(), lion.dtype = dtype, lion.numel = n;
    lion.state1 = state1.get<uint8_t>(), lion.absmax1 = d_absmax1.get<float>(), lion.qmap1 = d_map.get<float>();
    lion.weight_decay = 0.1f;
    rows.push_back({std::string("lion8bit_blockwise_step ") + dtype_label(dtype),
                    median_ms([&] { ftcore::cuda::lion8bit_blockwise_step(lion, nullptr); }),
                    double(n) * (3 * es + 2) + double(blocks) * 8});
  }
  for (DType dtype : {DType::BF16, DType::F32}) {
    rows.push_back({std::string("dequantize_4bit blocksize 64 -> ") + dtype_label(dtype), median_ms([&] {
                      ftcore::cuda::dequantize_4bit(d_codes1.get<uint8_t>(), d_scale.get<float>(), d_code16.get<float>(),
                                                    n, 64, param.get(), dtype, nullptr);
                    }),
                    double(n) * (0.5 + double(dtype_size(dtype))) + double(n) / 64 * 4});
  }
  rows.push_back({"dequantize_blockwise_8bit blocksize 256 -> f32", median_ms([&] {
                    ftcore::cuda::dequantize_blockwise_8bit(d_codes1.get<uint8_t>(), d_scale.get<float>(),
                                                            d_map.get<float>(), n, 256, 0.5f, param.get<float>(), nullptr);
                  }),
                  double(n) * 5 + double(blocks) * 4});
  check(cudaDeviceSynchronize(), "benchmark");

  const double memcpy_gbs = rows[0].bytes / (rows[0].ms * 1e6);
  std::printf("device: %s, %lld elements\n", prop.name, static_cast<long long>(n));
  std::printf("%-48s %10s %10s %12s\n", "kernel", "ms", "GB/s", "vs memcpy");
  for (const Row& r : rows) {
    const double gbs = r.bytes / (r.ms * 1e6);
    std::printf("%-48s %10.3f %10.1f %11.2fx\n", r.name.c_str(), r.ms, gbs, gbs / memcpy_gbs);
  }
  return 0;
}

}  // namespace ftcore::cuda_test

// cuda_kernels_test's host reference (fp32, bitsandbytes' operation order),
// device round trips of the launchers in cuda_kernels.h, and comparisons.
// The reference is written from bnb's CPU backend
// (_optimizer_update_8bit_blockwise_cpu, quantize_cpu's BinSearch lookup,
// dequantize_4bit); quantization goes through a 65536-entry table built by a
// sweep over the grid, independent of the kernels' binary search.
#pragma once

#include <cuda_runtime.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cuda_kernels.h"

namespace ftcore::cuda_test {

using ftcore::cuda::DType;

// Tolerances of the host reference against bitsandbytes' CPU backend
// (measured on bnb 0.50.2, torch 2.11, step 3 of 1357 elements x 3 dtypes per
// rule): codes and absmax identical; params at most 2 ulps of the param dtype
// apart on at most 1% of elements: 2 of 1357 fp32 Adam params (one 1 ulp, one
// 2 ulps) differ from every scalar formulation of the update we tried (fused
// or not, reciprocal or division), so from torch's vectorized CPU kernels;
// bf16/f16 and Lion params identical.
inline constexpr int64_t kParamUlpsVsBnb = 2;
inline constexpr double kParamDifferingFractionVsBnb = 0.01;

inline const char* dtype_label(DType d) { return d == DType::F32 ? "f32" : d == DType::BF16 ? "bf16" : "f16"; }
inline size_t dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }

inline float decode(uint16_t bits, DType d) {
  return d == DType::BF16 ? float(c10::BFloat16(bits, c10::BFloat16::from_bits()))
                          : float(c10::Half(bits, c10::Half::from_bits()));
}
inline uint16_t encode16(float x, DType d) { return d == DType::BF16 ? c10::BFloat16(x).x : c10::Half(x).x; }
// Round to nearest even in `d` (c10's conversions), back as float.
inline float round_to(float x, DType d) { return d == DType::F32 ? x : decode(encode16(x, d), d); }

inline std::vector<uint8_t> encode_values(const std::vector<float>& v, DType d) {
  std::vector<uint8_t> out(v.size() * dtype_size(d));
  for (size_t i = 0; i < v.size(); ++i) {
    if (d == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t bits = encode16(v[i], d);
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
  }
  return out;
}
inline std::vector<float> decode_values(const std::vector<uint8_t>& bytes, DType d) {
  std::vector<float> out(bytes.size() / dtype_size(d));
  for (size_t i = 0; i < out.size(); ++i) {
    if (d == DType::F32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, bytes.data() + 2 * i, 2);
      out[i] = decode(bits, d);
    }
  }
  return out;
}

// ------------------------------------------------------------ host reference

enum class Rule { Adam, Lion };

struct Hyper {
  float beta1, beta2, eps, lr, weight_decay, gnorm_scale;
  float bias_correction1, bias_correction2;  // 1 - beta^step (Adam)
};

struct OptimizerCase {
  Rule rule = Rule::Adam;
  DType dtype = DType::F32;
  std::vector<float> param, grad;  // values representable in dtype
  std::vector<uint8_t> state1, state2;
  std::vector<float> absmax1, absmax2, qmap1, qmap2;
  Hyper h{};
  void set_step(int step) {
    h.bias_correction1 = float(1.0 - std::pow(double(h.beta1), step));
    h.bias_correction2 = float(1.0 - std::pow(double(h.beta2), step));
  }
};

// bnb's quantize_cpu: the code of each of 65536 grid points -1 + 2k/65535 is
// the map entry nearest to it (ties to the lower entry: midpoints compared with <).
inline std::vector<uint8_t> grid_table(const std::vector<float>& map) {
  std::vector<uint8_t> table(65536);
  int c = 0;
  for (int k = 0; k < 65536; ++k) {
    const float grid = -1.0f + (2.0f * float(k)) / 65535.0f;
    while (c < 255 && 0.5f * (map[c] + map[c + 1]) < grid) ++c;
    table[k] = uint8_t(c);
  }
  return table;
}

// A block of fp32 values to codes and absmax: x * (1/absmax) clamped to
// [-1, 1], rounded to the grid by fma((n + 1) / 2, 65535, 0.5); a zero block
// gets absmax 0 and codes 0.
inline void quantize_block_reference(const float* x, int64_t count, const std::vector<uint8_t>& table, uint8_t* codes,
                                     float* absmax) {
  float amax = 0.0f;
  for (int64_t j = 0; j < count; ++j) amax = std::max(amax, std::fabs(x[j]));
  *absmax = amax;
  const float inv = 1.0f / amax;
  for (int64_t j = 0; j < count; ++j) {
    if (amax == 0.0f) {
      codes[j] = 0;
      continue;
    }
    const float n = std::clamp(x[j] * inv, -1.0f, 1.0f);
    codes[j] = table[static_cast<int>(std::fma((n + 1.0f) * 0.5f, 65535.0f, 0.5f))];
  }
}

// One step over every 256-element block: dequantize with the old absmax,
// update in fp32, requantize with the new absmax.
inline void step_reference(OptimizerCase& k) {
  const bool adam = k.rule == Rule::Adam;
  const Hyper& h = k.h;
  const float omb1 = 1.0f - h.beta1, omb2 = 1.0f - h.beta2;
  const float neg_step = adam ? float(-double(h.lr) / double(h.bias_correction1)) : -h.lr;
  const float sqrt_bc2 = float(std::sqrt(double(h.bias_correction2)));
  const float decay = float(1.0 - double(h.lr) * double(h.weight_decay));
  const std::vector<uint8_t> table1 = grid_table(k.qmap1);
  const std::vector<uint8_t> table2 = adam ? grid_table(k.qmap2) : std::vector<uint8_t>{};
  const int64_t n = static_cast<int64_t>(k.param.size());
  std::vector<float> s1(256), s2(256);
  for (int64_t b = 0; b * 256 < n; ++b) {
    const int64_t first = b * 256, count = std::min<int64_t>(256, n - first);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t i = first + j;
      const float g = k.grad[i] * h.gnorm_scale;
      float p = k.param[i];
      s1[j] = k.qmap1[k.state1[i]] * k.absmax1[b];
      if (adam) {
        s2[j] = k.qmap2[k.state2[i]] * k.absmax2[b];
        s1[j] = std::fma(omb1, g, s1[j] * h.beta1);      // torch add_(g, alpha): fused
        s2[j] = std::fma(omb2 * g, g, s2[j] * h.beta2);  // torch addcmul_: fused
        const float denom = std::sqrt(s2[j]) / sqrt_bc2 + h.eps;
        if (h.weight_decay > 0.0f) p = p * decay;
        p = p + (neg_step * s1[j]) / denom;              // torch addcdiv_: self + value * t1 / t2
      } else {
        if (h.weight_decay > 0.0f) p = p * decay;
        const float mix = s1[j] * h.beta1 + g * omb1;
        p = p + neg_step * float((mix > 0.0f) - (mix < 0.0f));
        s1[j] = std::fma(omb2, g, s1[j] * h.beta2);
      }
      k.param[i] = round_to(p, k.dtype);
    }
    quantize_block_reference(s1.data(), count, table1, k.state1.data() + first, k.absmax1.data() + b);
    if (adam) quantize_block_reference(s2.data(), count, table2, k.state2.data() + first, k.absmax2.data() + b);
  }
}

inline std::vector<float> dequantize_4bit_reference(const std::vector<uint8_t>& packed, const std::vector<float>& absmax,
                                                    const std::vector<float>& code16, int64_t numel, int64_t blocksize,
                                                    DType dtype) {
  std::vector<float> out(numel);
  for (int64_t i = 0; i < numel; ++i) {
    const uint8_t byte = packed[i / 2];
    out[i] = round_to(code16[i % 2 == 0 ? byte >> 4 : byte & 0xf] * absmax[i / blocksize], dtype);
  }
  return out;
}

inline std::vector<float> dequantize_8bit_reference(const std::vector<uint8_t>& codes, const std::vector<float>& absmax,
                                                    const std::vector<float>& code256, int64_t numel, int64_t blocksize,
                                                    float offset) {
  std::vector<float> out(numel);
  for (int64_t i = 0; i < numel; ++i) out[i] = code256[codes[i]] * absmax[i / blocksize] + offset;
  return out;
}

// ------------------------------------------------------------ device side

inline void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// cudaMalloc'd bytes, `offset` bytes past a 256-byte aligned base (offset 1 or
// one element misaligns the vector loads and sends the kernels down the element path).
class DeviceBuffer {
 public:
  DeviceBuffer(size_t bytes, size_t offset) : offset_(offset) { check(cudaMalloc(&base_, bytes + offset + 1), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(base_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T = void>
  T* get() const { return reinterpret_cast<T*>(static_cast<char*>(base_) + offset_); }
  template <typename V>
  static DeviceBuffer upload(const V& host, size_t offset) {
    DeviceBuffer b(host.size() * sizeof(host[0]), offset);
    check(cudaMemcpy(b.get(), host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice), "upload");
    return b;
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : base_(std::exchange(o.base_, nullptr)), offset_(o.offset_) {}
  template <typename V>
  void download(V& host) const {
    check(cudaDeviceSynchronize(), "kernel");
    check(cudaMemcpy(host.data(), get(), host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost), "download");
  }

 private:
  void* base_ = nullptr;
  size_t offset_ = 0;
};

inline void step_on_device(OptimizerCase& k, bool misalign) {
  const size_t elem = misalign ? dtype_size(k.dtype) : 0, byte = misalign ? 1 : 0;
  std::vector<uint8_t> param_bytes = encode_values(k.param, k.dtype);
  DeviceBuffer param = DeviceBuffer::upload(param_bytes, elem);
  DeviceBuffer grad = DeviceBuffer::upload(encode_values(k.grad, k.dtype), elem);
  DeviceBuffer s1 = DeviceBuffer::upload(k.state1, byte), a1 = DeviceBuffer::upload(k.absmax1, 0),
               m1 = DeviceBuffer::upload(k.qmap1, 0);
  if (k.rule == Rule::Adam) {
    DeviceBuffer s2 = DeviceBuffer::upload(k.state2, byte), a2 = DeviceBuffer::upload(k.absmax2, 0),
                 m2 = DeviceBuffer::upload(k.qmap2, 0);
    ftcore::cuda::Adam8bitArgs a;
    a.param = param.get();
    a.grad = grad.get();
    a.dtype = k.dtype;
    a.numel = int64_t(k.param.size());
    a.state1 = s1.get<uint8_t>();
    a.state2 = s2.get<uint8_t>();
    a.absmax1 = a1.get<float>();
    a.absmax2 = a2.get<float>();
    a.qmap1 = m1.get<float>();
    a.qmap2 = m2.get<float>();
    a.beta1 = k.h.beta1, a.beta2 = k.h.beta2, a.eps = k.h.eps, a.lr = k.h.lr, a.weight_decay = k.h.weight_decay;
    a.bias_correction1 = k.h.bias_correction1, a.bias_correction2 = k.h.bias_correction2;
    a.gnorm_scale = k.h.gnorm_scale;
    ftcore::cuda::adam8bit_blockwise_step(a, nullptr);
    s2.download(k.state2);
    a2.download(k.absmax2);
  } else {
    ftcore::cuda::Lion8bitArgs a;
    a.param = param.get();
    a.grad = grad.get();
    a.dtype = k.dtype;
    a.numel = int64_t(k.param.size());
    a.state1 = s1.get<uint8_t>();
    a.absmax1 = a1.get<float>();
    a.qmap1 = m1.get<float>();
    a.beta1 = k.h.beta1, a.beta2 = k.h.beta2, a.lr = k.h.lr, a.weight_decay = k.h.weight_decay;
    a.gnorm_scale = k.h.gnorm_scale;
    ftcore::cuda::lion8bit_blockwise_step(a, nullptr);
  }
  param.download(param_bytes);
  k.param = decode_values(param_bytes, k.dtype);
  s1.download(k.state1);
  a1.download(k.absmax1);
}

inline std::vector<float> dequantize_4bit_on_device(const std::vector<uint8_t>& packed, const std::vector<float>& absmax,
                                                    const std::vector<float>& code16, int64_t numel, int64_t blocksize,
                                                    DType dtype, bool misalign) {
  DeviceBuffer p = DeviceBuffer::upload(packed, misalign ? 1 : 0), a = DeviceBuffer::upload(absmax, 0),
               c = DeviceBuffer::upload(code16, 0);
  DeviceBuffer out(numel * dtype_size(dtype), misalign ? dtype_size(dtype) : 0);
  ftcore::cuda::dequantize_4bit(p.get<uint8_t>(), a.get<float>(), c.get<float>(), numel, blocksize, out.get(), dtype,
                                nullptr);
  std::vector<uint8_t> bytes(numel * dtype_size(dtype));
  out.download(bytes);
  return decode_values(bytes, dtype);
}

inline std::vector<float> dequantize_8bit_on_device(const std::vector<uint8_t>& codes, const std::vector<float>& absmax,
                                                    const std::vector<float>& code256, int64_t numel, int64_t blocksize,
                                                    float offset, bool misalign) {
  DeviceBuffer q = DeviceBuffer::upload(codes, misalign ? 1 : 0), a = DeviceBuffer::upload(absmax, 0),
               c = DeviceBuffer::upload(code256, 0);
  DeviceBuffer out(numel * sizeof(float), misalign ? 4 : 0);
  ftcore::cuda::dequantize_blockwise_8bit(q.get<uint8_t>(), a.get<float>(), c.get<float>(), numel, blocksize, offset,
                                          out.get<float>(), nullptr);
  std::vector<float> result(numel);
  out.download(result);
  return result;
}

// Where the whole range was last prefetched to: a device ordinal,
// cudaCpuDeviceId for the host, cudaInvalidDeviceId otherwise.
inline int last_prefetch_location(const void* ptr, size_t bytes) {
  cudaMemLocationType type = cudaMemLocationTypeInvalid;
  check(cudaMemRangeGetAttribute(&type, sizeof(type), cudaMemRangeAttributeLastPrefetchLocationType,
                                 const_cast<void*>(ptr), bytes),
        "cudaMemRangeGetAttribute(LastPrefetchLocationType)");
  if (type == cudaMemLocationTypeHost) return cudaCpuDeviceId;
  if (type != cudaMemLocationTypeDevice) return cudaInvalidDeviceId;
  int id = cudaInvalidDeviceId;
  check(cudaMemRangeGetAttribute(&id, sizeof(id), cudaMemRangeAttributeLastPrefetchLocationId, const_cast<void*>(ptr),
                                 bytes),
        "cudaMemRangeGetAttribute(LastPrefetchLocationId)");
  return id;
}

// ------------------------------------------------------------ comparisons

// Distance in units in the last place of `d` (sign-magnitude bits made monotonic).
inline int64_t ulps_apart(float a, float b, DType d) {
  auto key = [d](float x) -> int64_t {
    if (d == DType::F32) {
      int32_t i;
      std::memcpy(&i, &x, 4);
      return i < 0 ? -int64_t(i & 0x7fffffff) : int64_t(i);
    }
    const int32_t i = encode16(x, d);
    return (i & 0x8000) ? -int64_t(i & 0x7fff) : int64_t(i);
  };
  return std::llabs(key(a) - key(b));
}

inline void expect_params_close(const std::vector<float>& got, const std::vector<float>& want, DType d, int64_t ulps,
                                double max_fraction_differing, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t worst = 0, differing = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t u = ulps_apart(got[i], want[i], d);
    worst = std::max(worst, u);
    differing += u != 0;
  }
  EXPECT_LE(worst, ulps) << what << ": params up to " << worst << " ulps apart, " << differing << " of " << got.size()
                         << " differ";
  EXPECT_LE(double(differing), max_fraction_differing * double(got.size()))
      << what << ": " << differing << " of " << got.size() << " params differ";
}

inline void expect_identical(const OptimizerCase& got, const OptimizerCase& want, const std::string& what) {
  expect_params_close(got.param, want.param, got.dtype, 0, 0.0, what);
  EXPECT_EQ(got.state1, want.state1) << what << " state1";
  EXPECT_EQ(got.absmax1, want.absmax1) << what << " absmax1";
  EXPECT_EQ(got.state2, want.state2) << what << " state2";
  EXPECT_EQ(got.absmax2, want.absmax2) << what << " absmax2";
}

// ------------------------------------------------------------ random inputs

inline std::vector<float> random_grad(int64_t numel, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> g(numel);
  float scale = 1.0f;
  const bool zero_first_block = (seed / 1000) % 2 == 1;  // with a fresh first block: absmax stays 0
  for (int64_t i = 0; i < numel; ++i) {
    if (i % 256 == 0) scale = std::ldexp(1.0f, -int(rng() % 10));  // per-block magnitudes 2^-9..1
    const float x = normal(rng) * scale;
    g[i] = (zero_first_block && i < 256) ? 0.0f : round_to(x, dtype);
  }
  return g;
}

int run_benchmark(int argc, char** argv);

// Random packed nibbles and positive absmax for `numel` 4-bit values.
inline std::pair<std::vector<uint8_t>, std::vector<float>> random_4bit(int64_t numel, int64_t blocksize, std::mt19937& rng) {
  std::vector<uint8_t> packed((numel + 1) / 2);
  for (auto& b : packed) b = static_cast<uint8_t>(rng() & 0xff);
  std::vector<float> absmax((numel + blocksize - 1) / blocksize);
  for (auto& a : absmax) a = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, int(rng() % 16) - 8);
  return {packed, absmax};
}

}  // namespace ftcore::cuda_test

// CUDA kernels of the 8-bit optimizers, the 4-bit dequantization and the
// paged (managed-memory) optimizer state, behind plain C++ launchers so that
// plugins compiled without nvcc can call them. Pointers are device (or
// managed) pointers; `stream` is a cudaStream_t, nullptr for the default
// stream (ftcore uses no other). Built into the static library
// ftcore_cuda_kernels when FTCORE_WITH_CUDA is on; callers compile their CUDA
// branch under `#if FTCORE_CUDA_KERNELS` (defined 1 by that library's usage
// requirements) and throw "built without CUDA" otherwise.
//
// The update rules are the CPU kernels' (plugins/optimizers/blockwise8/), one
// thread block per 256-element quantization block, as bitsandbytes'
// kOptimizer8bit2StateBlockwise / kOptimizer8bit1StateBlockwise compute them.
//
// Implementation notes (plugins/cuda/README.md has the full update rules):
// - Include as `#include "cuda_kernels.h"`; the library's PUBLIC include
//   directory is plugins/cuda, and it links CUDA::cudart publicly.
// - Each 256-element quantization block is handled by one warp (8 elements
//   per lane, 8 warps per thread block sharing the maps in shared memory);
//   the result is the same as one thread block per quantization block.
// - Arithmetic is bitsandbytes' CPU backend in fp32, fused multiply-adds only
//   where torch's CPU kernels fuse them; requantization is bnb's CPU rule (the
//   map entry nearest to the value's point on a 65536-point grid, ties to the
//   lower code), the same codes as plugins/optimizers/blockwise8. The maps
//   are never written.
// - All launchers are asynchronous on `stream`; argument errors throw
//   std::invalid_argument before any CUDA call, CUDA errors std::runtime_error
//   naming the launcher and the failed call.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ftcore::cuda {

enum class DType : int { F32 = 0, BF16 = 1, F16 = 2 };

// Elements per quantization block of optimizer state (bitsandbytes' 8-bit optimizers).
inline constexpr int64_t kOptimizerBlock = 256;

// True when this build has the kernels, and a CUDA device is present.
bool device_available();

struct Adam8bitArgs {
  void* param = nullptr;       // numel elements of `dtype`
  const void* grad = nullptr;  // same dtype
  DType dtype = DType::F32;
  int64_t numel = 0;
  uint8_t* state1 = nullptr;   // exp_avg codes (signed dynamic map)
  uint8_t* state2 = nullptr;   // exp_avg_sq codes (unsigned dynamic map)
  float* absmax1 = nullptr;    // ceil(numel / 256) per state
  float* absmax2 = nullptr;
  const float* qmap1 = nullptr;  // 256 floats on the device
  const float* qmap2 = nullptr;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, lr = 1e-3f, weight_decay = 0.0f;
  float bias_correction1 = 1.0f;  // 1 - beta1^step
  float bias_correction2 = 1.0f;  // 1 - beta2^step
  float gnorm_scale = 1.0f;       // percentile clipping's factor (1: none)
};
void adam8bit_blockwise_step(const Adam8bitArgs& args, void* stream);

struct Lion8bitArgs {
  void* param = nullptr;
  const void* grad = nullptr;
  DType dtype = DType::F32;
  int64_t numel = 0;
  uint8_t* state1 = nullptr;  // exp_avg codes (signed dynamic map)
  float* absmax1 = nullptr;
  const float* qmap1 = nullptr;
  float beta1 = 0.9f, beta2 = 0.99f, lr = 1e-4f, weight_decay = 0.0f;
  float gnorm_scale = 1.0f;
};
void lion8bit_blockwise_step(const Lion8bitArgs& args, void* stream);

// NF4/FP4 (bitsandbytes layout: two codes per byte, first element in the
// high nibble): out[i] = code16[nibble(i)] * absmax[i / blocksize].
void dequantize_4bit(const uint8_t* packed, const float* absmax, const float* code16, int64_t numel,
                     int64_t blocksize, void* out, DType out_dtype, void* stream);
// 8-bit blockwise codes -> fp32 (the nested absmax of double quantization):
// out[i] = code256[codes[i]] * absmax[i / blocksize] + offset.
void dequantize_blockwise_8bit(const uint8_t* codes, const float* absmax, const float* code256, int64_t numel,
                               int64_t blocksize, float offset, float* out, void* stream);

// Managed memory for paged optimizer state, migrated on demand; prefetch
// moves pages ahead of use (device -1: to the host).
void* managed_alloc(size_t bytes);
void managed_free(void* ptr);
void prefetch(const void* ptr, size_t bytes, int device, void* stream);

}  // namespace ftcore::cuda

// Dequantization of bitsandbytes' blockwise formats on the GPU:
//   4-bit (NF4/FP4): two codes per byte, element 2k in the high nibble of
//     byte k, element 2k+1 in the low nibble; out = code16[nibble] * absmax[i / blocksize],
//     rounded to nearest even for bf16/f16 (bnb's dequantize_4bit).
//   8-bit (the nested absmax of double quantization, bnb's
//     dequantize_blockwise plus QuantState.offset): out = code256[code] * absmax[i / blocksize] + offset,
//     one rounding per operation (the library is built with --fmad=false).
// Each thread decodes a group of elements (16 nibbles from one 8-byte load,
// 4 codes from one 4-byte load, one absmax) and writes them with 16-byte
// stores; the last, partial group, misaligned buffers and block sizes that
// are not a multiple of the group take the element-wise path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "cuda_check.h"

namespace ftcore::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// 16 consecutive outputs through 16-byte stores; 16-bit values packed two to
// a 32-bit word with shifts (element 2k in the low half), all in registers.
__device__ __forceinline__ void store16(float* out, const float (&v)[16]) {
#pragma unroll
  for (int k = 0; k < 4; ++k)
    reinterpret_cast<float4*>(out)[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
}
__device__ __forceinline__ uint32_t half_bits(float x, const __nv_bfloat16*) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint32_t half_bits(float x, const __half*) { return __half_as_ushort(__float2half_rn(x)); }
template <typename H>
__device__ __forceinline__ void store16(H* out, const float (&v)[16]) {
  uint32_t w[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) w[k] = half_bits(v[2 * k], out) | (half_bits(v[2 * k + 1], out) << 16);
  reinterpret_cast<uint4*>(out)[0] = make_uint4(w[0], w[1], w[2], w[3]);
  reinterpret_cast<uint4*>(out)[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    dequantize_4bit_kernel(const uint8_t* __restrict__ packed, const float* __restrict__ absmax,
                           const float* __restrict__ code16, int64_t numel, int64_t blocksize, T* __restrict__ out) {
  __shared__ float code[16];
  if (threadIdx.x < 16) code[threadIdx.x] = code16[threadIdx.x];
  __syncthreads();
  const bool group_in_one_block = blocksize % 16 == 0;
  const int64_t groups = (numel + 15) / 16;
  for (int64_t gi = int64_t(blockIdx.x) * kThreads + threadIdx.x; gi < groups; gi += int64_t(gridDim.x) * kThreads) {
    const int64_t first = gi * 16;
    if (kVector && group_in_one_block && first + 16 <= numel) {
      const uint2 raw = reinterpret_cast<const uint2*>(packed)[gi];
      const float scale = absmax[first / blocksize];
      float v[16];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const uint32_t byte = ((k < 4 ? raw.x : raw.y) >> (8 * (k % 4))) & 0xffu;
        v[2 * k] = code[byte >> 4] * scale;
        v[2 * k + 1] = code[byte & 0xfu] * scale;
      }
      store16(out + first, v);
    } else {
      const int64_t last = first + 16 < numel ? first + 16 : numel;
      for (int64_t i = first; i < last; ++i) {
        const uint32_t byte = packed[i >> 1];
        const uint32_t nibble = (i & 1) ? (byte & 0xfu) : (byte >> 4);
        out[i] = from_float<T>(code[nibble] * absmax[i / blocksize]);
      }
    }
  }
}

template <bool kVector>
__global__ void __launch_bounds__(kThreads)
    dequantize_8bit_kernel(const uint8_t* __restrict__ codes, const float* __restrict__ absmax,
                           const float* __restrict__ code256, int64_t numel, int64_t blocksize, float offset,
                           float* __restrict__ out) {
  __shared__ float code[256];
  code[threadIdx.x] = code256[threadIdx.x];  // kThreads == 256
  __syncthreads();
  const bool group_in_one_block = blocksize % 4 == 0;
  const int64_t groups = (numel + 3) / 4;
  for (int64_t gi = int64_t(blockIdx.x) * kThreads + threadIdx.x; gi < groups; gi += int64_t(gridDim.x) * kThreads) {
    const int64_t first = gi * 4;
    if (kVector && group_in_one_block && first + 4 <= numel) {
      const uchar4 c = reinterpret_cast<const uchar4*>(codes)[gi];
      const float scale = absmax[first / blocksize];
      const float4 v = make_float4(code[c.x] * scale + offset, code[c.y] * scale + offset,
                                   code[c.z] * scale + offset, code[c.w] * scale + offset);
      reinterpret_cast<float4*>(out)[gi] = v;
    } else {
      const int64_t last = first + 4 < numel ? first + 4 : numel;
      for (int64_t i = first; i < last; ++i) out[i] = code[codes[i]] * absmax[i / blocksize] + offset;
    }
  }
}

template <typename T>
void launch_4bit(const uint8_t* packed, const float* absmax, const float* code16, int64_t numel, int64_t blocksize,
                 void* out, cudaStream_t stream, const char* where) {
  const int grid = detail::grid_for((numel + 15) / 16, kThreads, 8, where);
  T* typed = static_cast<T*>(out);
  if (detail::aligned(packed, 8) && detail::aligned(out, 16))
    dequantize_4bit_kernel<T, true><<<grid, kThreads, 0, stream>>>(packed, absmax, code16, numel, blocksize, typed);
  else
    dequantize_4bit_kernel<T, false><<<grid, kThreads, 0, stream>>>(packed, absmax, code16, numel, blocksize, typed);
  FTCORE_CUDA_CHECK(cudaGetLastError(), where);
}

}  // namespace

void dequantize_4bit(const uint8_t* packed, const float* absmax, const float* code16, int64_t numel,
                     int64_t blocksize, void* out, DType out_dtype, void* stream) {
  constexpr const char* where = "ftcore::cuda::dequantize_4bit";
  detail::require(numel >= 0, where, "numel must be >= 0, got " + std::to_string(numel));
  detail::require(blocksize > 0, where, "blocksize must be > 0, got " + std::to_string(blocksize));
  if (numel == 0) return;
  detail::require(packed && absmax && code16 && out, where, "packed, absmax, code16 and out must be non-null");
  const cudaStream_t st = detail::as_stream(stream);
  switch (out_dtype) {
    case DType::F32: return launch_4bit<float>(packed, absmax, code16, numel, blocksize, out, st, where);
    case DType::BF16: return launch_4bit<__nv_bfloat16>(packed, absmax, code16, numel, blocksize, out, st, where);
    case DType::F16: return launch_4bit<__half>(packed, absmax, code16, numel, blocksize, out, st, where);
  }
  throw std::invalid_argument(std::string(where) + ": out_dtype " + std::to_string(static_cast<int>(out_dtype)) +
                              " is not one of f32, bf16, f16");
}

void dequantize_blockwise_8bit(const uint8_t* codes, const float* absmax, const float* code256, int64_t numel,
                               int64_t blocksize, float offset, float* out, void* stream) {
  constexpr const char* where = "ftcore::cuda::dequantize_blockwise_8bit";
  detail::require(numel >= 0, where, "numel must be >= 0, got " + std::to_string(numel));
  detail::require(blocksize > 0, where, "blocksize must be > 0, got " + std::to_string(blocksize));
  if (numel == 0) return;
  detail::require(codes && absmax && code256 && out, where, "codes, absmax, code256 and out must be non-null");
  const cudaStream_t st = detail::as_stream(stream);
  const int grid = detail::grid_for((numel + 3) / 4, kThreads, 8, where);
  if (detail::aligned(codes, 4) && detail::aligned(out, 16))
    dequantize_8bit_kernel<true><<<grid, kThreads, 0, st>>>(codes, absmax, code256, numel, blocksize, offset, out);
  else
    dequantize_8bit_kernel<false><<<grid, kThreads, 0, st>>>(codes, absmax, code256, numel, blocksize, offset, out);
  FTCORE_CUDA_CHECK(cudaGetLastError(), where);
}

}  // namespace ftcore::cuda

// 8-bit blockwise Adam and Lion steps on the GPU (bitsandbytes' "8-bit
// optimizers via block-wise quantization", Dettmers et al. 2021,
// https://arxiv.org/abs/2110.02861). State lives as one uint8 code per element
// plus one fp32 absmax per 256-element block; each step dequantizes the block,
// updates it in fp32 and requantizes it with the block's new absmax.
//
// The arithmetic is bitsandbytes' CPU backend, operation by operation
// (backends/cpu/ops.py, _optimizer_update_8bit_blockwise_cpu), in fp32, with a
// fused multiply-add exactly where torch's CPU kernels fuse one (add_ with
// alpha, addcmul_, addcdiv_), written fma(a, b, c) = a*b + c rounded once:
//   g   = grad * gnorm_scale
//   Adam: s1 = fma(1-b1, g, s1*b1)
//         s2 = fma((1-b2)*g, g, s2*b2)
//         p  = p*(1 - lr*wd)                                  (only when wd > 0)
//         p  = p + ((-lr/bc1) * s1) / (sqrt(s2)/sqrt(bc2) + eps)   (addcdiv_)
//   Lion: p  = p*(1 - lr*wd)                                  (only when wd > 0)
//         p  = p + (-lr) * sign(s1*b1 + g*(1-b1))
//         s1 = fma(1-b2, g, s1*b2)
// (bc1 = 1 - b1^step, bc2 = 1 - b2^step; -lr/bc1, sqrt(bc2) and 1 - lr*wd are
// formed in double as bnb forms them in Python.) The library is compiled with
// --fmad=false so nothing else is fused. bf16/f16 params and grads are widened
// to fp32 and the result rounded to nearest even.
//
// Requantization is bnb's CPU quantize_blockwise (its BinSearch "Direct2"
// lookup), which plugins/optimizers/blockwise8 reproduces with a table:
//   absmax = max |s| over the block            (0: every code is 0)
//   n      = clamp(s * (1/absmax), -1, 1)      fp32 reciprocal, then product
//   k      = trunc(fma((n + 1) * 0.5, 65535, 0.5))
//   code   = #{ i : 0.5*(map[i] + map[i+1]) < -1 + (2k)/65535 }
// i.e. the entry nearest to the 65536-point grid value k stands for (ties to
// the lower entry); counted here by binary search over the 255 midpoints.
//
// Layout: one warp per 256-element quantization block, each lane owning 8
// consecutive elements (vector loads: 16 bytes of bf16/f16, 2 x 16 bytes of
// f32, 8 bytes of codes); 8 warps per thread block share the maps in shared
// memory and stride over the blocks of the tensor.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "cuda_check.h"

namespace ftcore::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = 32 * kWarpsPerBlock;
constexpr int kPerLane = 8;  // 32 lanes x 8 = kOptimizerBlock
static_assert(32 * kPerLane == kOptimizerBlock, "one warp per quantization block");

enum class Rule { Adam, Lion };

struct StepConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float eps;          // Adam
  float neg_step;     // Adam: -lr/bc1; Lion: -lr
  float sqrt_bc2;     // Adam: sqrt(1 - beta2^step)
  float decay;        // 1 - lr*wd
  bool apply_decay;   // wd > 0
  float gnorm_scale;
};

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

// 16-bit values <-> their bits, two to a 32-bit word (element 2k in the low half).
__device__ __forceinline__ float half_bits_to_float(uint32_t bits, const __nv_bfloat16*) { return __uint_as_float(bits << 16); }
__device__ __forceinline__ float half_bits_to_float(uint32_t bits, const __half*) { return __half2float(__ushort_as_half(static_cast<unsigned short>(bits))); }
__device__ __forceinline__ uint32_t float_to_half_bits(float x, const __nv_bfloat16*) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
__device__ __forceinline__ uint32_t float_to_half_bits(float x, const __half*) { return __half_as_ushort(__float2half_rn(x)); }

// 8 consecutive elements through 16-byte loads/stores (callers check
// alignment); bits are unpacked with shifts so that everything stays in registers.
__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0];
  const float4 b = reinterpret_cast<const float4*>(p)[1];
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
__device__ __forceinline__ void store8(float* p, const float (&v)[8]) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
template <typename H>
__device__ __forceinline__ void load8(const H* p, float (&v)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[2 * k] = half_bits_to_float(w[k] & 0xffffu, p);
    v[2 * k + 1] = half_bits_to_float(w[k] >> 16, p);
  }
}
template <typename H>
__device__ __forceinline__ void store8(H* p, const float (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) w[k] = float_to_half_bits(v[2 * k], p) | (float_to_half_bits(v[2 * k + 1], p) << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}
__device__ __forceinline__ void load_codes8(const uint8_t* p, uint8_t (&q)[8]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = static_cast<uint8_t>(((k < 4 ? raw.x : raw.y) >> (8 * (k % 4))) & 0xffu);
}
__device__ __forceinline__ void store_codes8(uint8_t* p, const uint8_t (&q)[8]) {
  uint2 raw = make_uint2(0, 0);
#pragma unroll
  for (int k = 0; k < 8; ++k) (k < 4 ? raw.x : raw.y) |= uint32_t(q[k]) << (8 * (k % 4));
  *reinterpret_cast<uint2*>(p) = raw;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// The code of normalized value n: the grid point k it rounds to, then the
// number of midpoints below that grid point (mid: 255 ascending midpoints).
__device__ __forceinline__ uint8_t quantize_grid(const float* mid, float x, float inv_absmax) {
  float n = x * inv_absmax;
  n = n < -1.0f ? -1.0f : (n > 1.0f ? 1.0f : n);
  const float t = (n + 1.0f) * 0.5f;
  const int k = static_cast<int>(__fmaf_rn(t, 65535.0f, 0.5f));
  const float grid = -1.0f + (2.0f * static_cast<float>(k)) / 65535.0f;
  int below = 0;  // largest count with mid[count - 1] < grid
#pragma unroll
  for (int step = 128; step > 0; step >>= 1)
    if (mid[below + step - 1] < grid) below += step;
  return static_cast<uint8_t>(below);
}

// No register cap: Adam needs ~77 registers per thread (3 blocks, 24 warps
// per SM); capping at 64 for a fourth block spills (ptxas -v).
template <typename T, Rule kRule, bool kVector>
__global__ void __launch_bounds__(kThreads)
    step_8bit_blockwise(T* __restrict__ param, const T* __restrict__ grad, int64_t numel,
                        uint8_t* __restrict__ state1, uint8_t* __restrict__ state2, float* __restrict__ absmax1,
                        float* __restrict__ absmax2, const float* __restrict__ qmap1,
                        const float* __restrict__ qmap2, StepConstants c) {
  constexpr bool kTwoStates = kRule == Rule::Adam;
  __shared__ float map1[256], mid1[255];
  __shared__ float map2[kTwoStates ? 256 : 1], mid2[kTwoStates ? 255 : 1];
  for (int i = threadIdx.x; i < 256; i += kThreads) {
    map1[i] = qmap1[i];
    if (i < 255) mid1[i] = 0.5f * (qmap1[i] + qmap1[i + 1]);
    if constexpr (kTwoStates) {
      map2[i] = qmap2[i];
      if (i < 255) mid2[i] = 0.5f * (qmap2[i] + qmap2[i + 1]);
    }
  }
  __syncthreads();

  const int lane = threadIdx.x % 32;
  const int64_t num_blocks = (numel + kOptimizerBlock - 1) / kOptimizerBlock;
  for (int64_t b = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; b < num_blocks;
       b += int64_t(gridDim.x) * kWarpsPerBlock) {
    const int64_t first = b * kOptimizerBlock + lane * kPerLane;
    const int64_t left = numel - first;
    const int valid = left <= 0 ? 0 : (left < kPerLane ? int(left) : kPerLane);

    float p[kPerLane] = {}, g[kPerLane] = {}, s1[kPerLane] = {}, s2[kPerLane] = {};
    uint8_t q1[kPerLane] = {}, q2[kPerLane] = {};
    if (kVector && valid == kPerLane) {
      load8(param + first, p);
      load8(grad + first, g);
      load_codes8(state1 + first, q1);
      if constexpr (kTwoStates) load_codes8(state2 + first, q2);
    } else {
#pragma unroll  // constant indices keep the arrays in registers
      for (int i = 0; i < kPerLane; ++i) {
        if (i >= valid) break;
        p[i] = to_float(param[first + i]);
        g[i] = to_float(grad[first + i]);
        q1[i] = state1[first + i];
        if constexpr (kTwoStates) q2[i] = state2[first + i];
      }
    }

    const float old_absmax1 = absmax1[b];
    const float old_absmax2 = kTwoStates ? absmax2[b] : 0.0f;
    float new_absmax1 = 0.0f, new_absmax2 = 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (i >= valid) break;
      const float gi = g[i] * c.gnorm_scale;
      s1[i] = map1[q1[i]] * old_absmax1;
      if constexpr (kRule == Rule::Adam) {
        s2[i] = map2[q2[i]] * old_absmax2;
        s1[i] = __fmaf_rn(c.one_minus_beta1, gi, s1[i] * c.beta1);
        s2[i] = __fmaf_rn(c.one_minus_beta2 * gi, gi, s2[i] * c.beta2);
        const float denom = sqrtf(s2[i]) / c.sqrt_bc2 + c.eps;
        if (c.apply_decay) p[i] = p[i] * c.decay;
        p[i] = p[i] + (c.neg_step * s1[i]) / denom;
        new_absmax2 = fmaxf(new_absmax2, fabsf(s2[i]));
      } else {
        if (c.apply_decay) p[i] = p[i] * c.decay;
        const float mix = s1[i] * c.beta1 + gi * c.one_minus_beta1;
        const float direction = mix > 0.0f ? 1.0f : (mix < 0.0f ? -1.0f : 0.0f);
        p[i] = p[i] + c.neg_step * direction;
        s1[i] = __fmaf_rn(c.one_minus_beta2, gi, s1[i] * c.beta2);
      }
      new_absmax1 = fmaxf(new_absmax1, fabsf(s1[i]));
    }
    // Every lane has read the old absmax before any lane gets past the shuffles.
    new_absmax1 = warp_max(new_absmax1);
    if constexpr (kTwoStates) new_absmax2 = warp_max(new_absmax2);
    if (lane == 0) {
      absmax1[b] = new_absmax1;
      if constexpr (kTwoStates) absmax2[b] = new_absmax2;
    }

    const float inv1 = 1.0f / new_absmax1, inv2 = kTwoStates ? 1.0f / new_absmax2 : 0.0f;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      if (i >= valid) break;
      q1[i] = new_absmax1 > 0.0f ? quantize_grid(mid1, s1[i], inv1) : 0;
      if constexpr (kTwoStates) q2[i] = new_absmax2 > 0.0f ? quantize_grid(mid2, s2[i], inv2) : 0;
    }
    if (kVector && valid == kPerLane) {
      store8(param + first, p);
      store_codes8(state1 + first, q1);
      if constexpr (kTwoStates) store_codes8(state2 + first, q2);
    } else {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        if (i >= valid) break;
        param[first + i] = from_float<T>(p[i]);
        state1[first + i] = q1[i];
        if constexpr (kTwoStates) state2[first + i] = q2[i];
      }
    }
  }
}

struct StepPointers {
  void* param;
  const void* grad;
  int64_t numel;
  uint8_t *state1, *state2;
  float *absmax1, *absmax2;
  const float *qmap1, *qmap2;
};

// Vector loads need 16-byte aligned params/grads and 8-byte aligned codes
// (block starts are multiples of 256 elements, so the bases decide).
bool aligned_for_vectors(const StepPointers& s) {
  return detail::aligned(s.param, 16) && detail::aligned(s.grad, 16) && detail::aligned(s.state1, 8) &&
         (s.state2 == nullptr || detail::aligned(s.state2, 8));
}

template <typename T, Rule kRule>
void launch_typed(const StepPointers& s, const StepConstants& c, cudaStream_t stream, const char* where) {
  const bool vector = aligned_for_vectors(s);
  const int64_t num_blocks = (s.numel + kOptimizerBlock - 1) / kOptimizerBlock;
  const int grid = detail::grid_for(num_blocks, kWarpsPerBlock, 8, where);
  auto* param = static_cast<T*>(s.param);
  auto* grad = static_cast<const T*>(s.grad);
  if (vector)
    step_8bit_blockwise<T, kRule, true><<<grid, kThreads, 0, stream>>>(param, grad, s.numel, s.state1, s.state2,
                                                                       s.absmax1, s.absmax2, s.qmap1, s.qmap2, c);
  else
    step_8bit_blockwise<T, kRule, false><<<grid, kThreads, 0, stream>>>(param, grad, s.numel, s.state1, s.state2,
                                                                        s.absmax1, s.absmax2, s.qmap1, s.qmap2, c);
  FTCORE_CUDA_CHECK(cudaGetLastError(), where);
}

template <Rule kRule>
void launch(DType dtype, const StepPointers& s, const StepConstants& c, void* stream, const char* where) {
  const cudaStream_t st = detail::as_stream(stream);
  switch (dtype) {
    case DType::F32: return launch_typed<float, kRule>(s, c, st, where);
    case DType::BF16: return launch_typed<__nv_bfloat16, kRule>(s, c, st, where);
    case DType::F16: return launch_typed<__half, kRule>(s, c, st, where);
  }
  throw std::invalid_argument(std::string(where) + ": dtype " + std::to_string(static_cast<int>(dtype)) +
                              " is not one of f32, bf16, f16");
}

void require_pointer(const void* p, const char* name, const char* where) {
  detail::require(p != nullptr, where, std::string(name) + " is null");
}

}  // namespace

void adam8bit_blockwise_step(const Adam8bitArgs& a, void* stream) {
  constexpr const char* where = "ftcore::cuda::adam8bit_blockwise_step";
  detail::require(a.numel >= 0, where, "numel must be >= 0, got " + std::to_string(a.numel));
  if (a.numel == 0) return;
  require_pointer(a.param, "param", where);
  require_pointer(a.grad, "grad", where);
  require_pointer(a.state1, "state1", where);
  require_pointer(a.state2, "state2", where);
  require_pointer(a.absmax1, "absmax1", where);
  require_pointer(a.absmax2, "absmax2", where);
  require_pointer(a.qmap1, "qmap1", where);
  require_pointer(a.qmap2, "qmap2", where);
  detail::require(a.bias_correction1 > 0.0f && a.bias_correction2 > 0.0f, where,
                  "bias corrections must be > 0 (1 - beta^step), got " + std::to_string(a.bias_correction1) + " and " +
                      std::to_string(a.bias_correction2));
  StepConstants c{};
  c.beta1 = a.beta1;
  c.one_minus_beta1 = 1.0f - a.beta1;
  c.beta2 = a.beta2;
  c.one_minus_beta2 = 1.0f - a.beta2;
  c.eps = a.eps;
  // Scalars bnb forms in Python doubles are formed in double here too.
  c.neg_step = static_cast<float>(-static_cast<double>(a.lr) / static_cast<double>(a.bias_correction1));
  c.sqrt_bc2 = static_cast<float>(std::sqrt(static_cast<double>(a.bias_correction2)));
  c.decay = static_cast<float>(1.0 - static_cast<double>(a.lr) * static_cast<double>(a.weight_decay));
  c.apply_decay = a.weight_decay > 0.0f;
  c.gnorm_scale = a.gnorm_scale;
  const StepPointers s{a.param, a.grad, a.numel, a.state1, a.state2, a.absmax1, a.absmax2, a.qmap1, a.qmap2};
  launch<Rule::Adam>(a.dtype, s, c, stream, where);
}

void lion8bit_blockwise_step(const Lion8bitArgs& a, void* stream) {
  constexpr const char* where = "ftcore::cuda::lion8bit_blockwise_step";
  detail::require(a.numel >= 0, where, "numel must be >= 0, got " + std::to_string(a.numel));
  if (a.numel == 0) return;
  require_pointer(a.param, "param", where);
  require_pointer(a.grad, "grad", where);
  require_pointer(a.state1, "state1", where);
  require_pointer(a.absmax1, "absmax1", where);
  require_pointer(a.qmap1, "qmap1", where);
  StepConstants c{};
  c.beta1 = a.beta1;
  c.one_minus_beta1 = 1.0f - a.beta1;
  c.beta2 = a.beta2;
  c.one_minus_beta2 = 1.0f - a.beta2;
  c.neg_step = -a.lr;
  c.sqrt_bc2 = 1.0f;
  c.decay = static_cast<float>(1.0 - static_cast<double>(a.lr) * static_cast<double>(a.weight_decay));
  c.apply_decay = a.weight_decay > 0.0f;
  c.gnorm_scale = a.gnorm_scale;
  const StepPointers s{a.param, a.grad, a.numel, a.state1, nullptr, a.absmax1, nullptr, a.qmap1, nullptr};
  launch<Rule::Lion>(a.dtype, s, c, stream, where);
}

}  // namespace ftcore::cuda

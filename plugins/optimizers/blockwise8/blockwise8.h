// Blockwise 8-bit quantization of fp32 with a 256-entry map, as
// bitsandbytes' CPU quantize_blockwise / dequantize_blockwise compute it
// (bitsandbytes 0.50): the tensor is cut into blocks of `blocksize`
// elements (the last one may be short); per block
//   absmax <- max |x|                                   (0: every code is 0)
//   n      <- clamp(x * (1 / absmax), -1, 1)            fp32 reciprocal, then product
//   code   <- lut[trunc(fma((n + 1) * 0.5, 65535, 0.5))]
// where lut[k] is the index of the map entry nearest to -1 + 2k/65535 (ties
// to the lower entry, via the midpoints 0.5 * (map[i] + map[i+1])). This is
// nearest-code rounding on a 65536-point grid: bitsandbytes' CPU kernel uses
// that table, so codes and absmax here equal bitsandbytes' bit for bit.
// Dequantization is out = map[code] * absmax.
//
// The 8-bit optimizers keep each state as codes (uint8, numel) and absmax
// (fp32, ceil(numel / 256)); this library also holds their fused update
// kernels (optim8bit_kernel.h) and the state codec (state_codec.h).
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include <ATen/core/Tensor.h>

namespace ftcore::plugins::blockwise8 {

// Elements per quantization block of optimizer state (bitsandbytes' 8-bit optimizers).
inline constexpr int64_t kStateBlock = 256;
// Points of the rounding grid on [-1, 1].
inline constexpr int kLutSize = 65536;

// A map, its rounding table, and the same table as the 255 grid indices at
// which its code steps up (the vector kernels search those instead of
// looking bytes up; code_search_avx512.h has the rule and the proof):
//   step_at[i] = min{k : lut[k] > i},  so  lut[k] = #{i : step_at[i] <= k},
// stored level by level for a binary search that records its decision at
// level l in bit l (code bit 7 - l): with rev_l(r) the l-bit reversal of r,
// search_tree[2^l - 1 + r] = step_at[(2 rev_l(r) + 1) * 2^(7-l) - 1], l = 0..7; [255] unused.
struct QuantMap {
  std::array<float, 256> code;
  std::array<uint8_t, kLutSize> lut;
  std::array<uint16_t, 256> search_tree;
};

// Builds the rounding table and search tree of a sorted 256-entry map; throws
// std::invalid_argument when a midpoint of the map is not below 1 (the code
// would not reach 255 on the grid, which the search tree assumes).
QuantMap make_quant_map(const std::array<float, 256>& code);
// bitsandbytes' dynamic maps (dynamic_map.h) with their tables, built once per process.
const QuantMap& signed_quant_map();    // exp_avg
const QuantMap& unsigned_quant_map();  // exp_avg_sq
inline const QuantMap& quant_map(bool is_signed) { return is_signed ? signed_quant_map() : unsigned_quant_map(); }

inline int64_t num_blocks(int64_t numel, int64_t blocksize) { return (numel + blocksize - 1) / blocksize; }

// Raw buffers: codes[numel], absmax[num_blocks(numel, blocksize)]. Any blocksize >= 1.
void quantize_blockwise(const float* x, int64_t numel, int64_t blocksize, const QuantMap& map, uint8_t* codes,
                        float* absmax);
void dequantize_blockwise(const uint8_t* codes, const float* absmax, int64_t numel, int64_t blocksize,
                          const QuantMap& map, float* out);

// Tensors (CPU; x is converted to contiguous fp32): returns {codes uint8 shaped like x, absmax fp32 [blocks]}.
std::pair<at::Tensor, at::Tensor> quantize_blockwise(const at::Tensor& x, int64_t blocksize, const QuantMap& map);
// Returns fp32 shaped like codes, on the CPU.
at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, int64_t blocksize,
                                const QuantMap& map);

}  // namespace ftcore::plugins::blockwise8

// Dequantization of a packed GPTQ weight (layout in gptq_pack.h) and the two
// products a frozen quantized Linear needs, without a persistent dense W:
//
//   matmul            y [M, out] = x [M, in] @ W^T
//   matmul_grad_input g_in [M, in] = g [M, out] @ W
//
// Both walk the output features in tiles of kTileOut columns: a tile of W^T
// [in, tile] is dequantized into a transient fp32 buffer (bounded at
// in * kTileOut floats), multiplied with ATen's GEMM, and dropped. The
// per-row unpack loop is compiled once per ISA (gptq_kernel_<isa>.cpp) and
// dispatched at run time. Dequantized values are exact in fp32: the scale
// has 11 significant bits and (q - zero) at most 9, so scale * (q - zero)
// needs no rounding, whatever the instruction set.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace ftcore::plugins::gptq {

constexpr int64_t kTileOut = 256;

// Input rows [row_begin, row_end) of W^T restricted to output columns
// [col0, col0 + cols), written as fp32 to dst [in, cols] (row stride cols).
struct DequantTile {
  const int32_t* qweight;  // [in*bits/32, out]
  int64_t out;
  const float* scales;     // fp32 [groups, out], already offset by col0
  const float* zeros;      // zero points as fp32 [groups, out], offset by col0
  const int32_t* g_idx;    // [in]
  int bits;
  int64_t col0, cols;
  float* dst;
};
using DequantRows = void (*)(const DequantTile& tile, int64_t row_begin, int64_t row_end);

struct DequantKernels {
  DequantRows rows;
};
DequantKernels generic_kernels();
DequantKernels avx2_kernels();
DequantKernels avx512_kernels();

struct PackedWeight {
  at::Tensor qweight;  // int32 [in*bits/32, out]
  at::Tensor qzeros;   // int32 [groups, out*bits/32]
  at::Tensor scales;   // fp16/bf16/fp32 [groups, out]
  at::Tensor g_idx;    // int32 [in]
  int bits = 4;
  int64_t in = 0, out = 0;
};

// Scales and zero points as fp32 [groups, out]: transient, one row per group.
struct GroupParams {
  at::Tensor scales, zeros;
};
GroupParams group_params(const PackedWeight& w);
// W^T columns [col0, col0 + cols) as fp32 [in, cols].
at::Tensor dequantize_transposed_tile(const PackedWeight& w, const GroupParams& p, int64_t col0, int64_t cols);
// The whole W [out, in] in `dtype`.
at::Tensor dequantize_packed(const PackedWeight& w, at::ScalarType dtype);
at::Tensor matmul_packed(const at::Tensor& x, const PackedWeight& w);
at::Tensor matmul_grad_input_packed(const at::Tensor& grad_out, const PackedWeight& w);

}  // namespace ftcore::plugins::gptq

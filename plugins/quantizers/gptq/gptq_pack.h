// AutoGPTQ's v1 packed layout, the one transformers/optimum/GPTQModel read
// for checkpoint_format "gptq":
//
//   <prefix>.qweight  int32 [in*bits/32, out]   codes, packed along in
//   <prefix>.qzeros   int32 [groups, out*bits/32] (zero - 1), packed along out
//   <prefix>.scales   fp16  [groups, out]
//   <prefix>.g_idx    int32 [in]                group of each input column
//
//   W[o, i] = scales[g_idx[i], o] * (q[i, o] - (qzeros[g_idx[i], o] + 1))
//
// Packing is a little-endian bit stream down each column: value k sits at
// bit bits*k, word (bits*k)/32, lowest bits first. For 2/4/8 bits that is
// 32/bits values per word; for 3 bits it is AutoGPTQ's layout where every
// 32 values fill 3 words and values 10 and 21 straddle a word boundary.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Tensor.h>

namespace ftcore::plugins::gptq {

bool supported_bits(int64_t bits);

// codes int32 [rows, cols] with values in [0, 2^bits) -> int32 [rows*bits/32, cols].
at::Tensor pack_rows(const at::Tensor& codes, int bits);
// The inverse: int32 [rows*bits/32, cols] -> int32 [rows, cols].
at::Tensor unpack_rows(const at::Tensor& packed, int bits, int64_t rows);

// qzeros <-> zero points. The v1 format stores zero - 1; a zero of 0 (only
// asymmetric groups whose minimum is within half a step of 0) is stored as
// 2^bits - 1 and read back modulo 2^bits, so our files round-trip exactly.
at::Tensor pack_zeros(const at::Tensor& zeros, int bits);          // [groups, out] -> [groups, out*bits/32]
at::Tensor unpack_zeros(const at::Tensor& qzeros, int bits, int64_t out);  // -> int32 [groups, out]

}  // namespace ftcore::plugins::gptq

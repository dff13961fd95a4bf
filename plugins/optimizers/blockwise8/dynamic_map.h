// The 8-bit "dynamic" quantization maps of bitsandbytes' 8-bit optimizers
// (Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization",
// https://arxiv.org/abs/2110.02861; the data type of Dettmers 2016,
// https://arxiv.org/abs/1511.04561): 256 sorted values in [-1, 1] (signed,
// for exp_avg) or [0, 1] (unsigned, for exp_avg_sq) whose leading zero bits
// act as an exponent (7 decades, 1e-6 .. 1) and the remaining bits as a
// linear fraction.
//
// Equal bit for bit to bitsandbytes.functional.create_dynamic_map(signed,
// max_exponent_bits=7, total_bits=8): decade i (scale 10^(i-6)) holds the
// midpoints of torch.linspace(0.1, 1, 2^i + 1) (signed: +-) or
// torch.linspace(0.1, 1, 2^(i+1) + 1) (unsigned), computed in fp32 with ATen's
// own linspace/add/div/mul so every rounding is the one bitsandbytes gets
// (ATen's CPU linspace rounds differently in its vectorized part), plus 0
// and 1.0, sorted.
#pragma once

#include <array>

namespace ftcore::plugins::blockwise8 {

// Computed once per process and sign; thread-safe.
const std::array<float, 256>& dynamic_map(bool is_signed);

}  // namespace ftcore::plugins::blockwise8

// The fixed code books of bitsandbytes' 4-bit and nested 8-bit formats, and
// the decision rules that pick a code for a normalized value (x in [-1, 1]).
//
// NF4 (QLoRA, arXiv:2305.14314, Appendix E): 16 quantiles of N(0, 1) scaled
// to [-1, 1], asymmetric with an exact zero. FP4: 1 sign, 2 exponent, 1
// mantissa bit (bias 2, subnormal 0b001 = 0.0625), normalized by 12; listed
// in bit-pattern order. The nested map is the signed dynamic map of
// "8-Bit Approximations for Parallelism in Deep Learning" (arXiv:1511.04561).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ftcore::plugins::bnb4bit {

enum class QuantType { NF4, FP4 };

const char* quant_type_name(QuantType type);  // "nf4" / "fp4"

// The 16 dequantization values, indexed by the 4-bit code.
const std::array<float, 16>& code_values(QuantType type);

// 4-bit code of x (already divided by the block absmax and clamped to
// [-1, 1]): the sorted values' bucket, with a value exactly on a midpoint
// (computed in fp32) going to the lower bucket, then mapped back to the
// bit pattern (FP4's two zeros: x <= 0 gives 0b0000, x > 0 gives 0b1000).
struct FourBitRule {
  std::array<float, 15> midpoints;  // ascending
  std::array<uint8_t, 16> code_of_bucket;
  uint8_t code(float x) const {
    int b = 0;
    while (b < 15 && midpoints[b] < x) ++b;  // count of midpoints strictly below x
    return code_of_bucket[b];
  }
};
const FourBitRule& four_bit_rule(QuantType type);

// The signed dynamic map, ascending (256 values, one zero, ends at 1.0).
const std::array<float, 256>& dynamic_map_signed();

// Nested-absmax quantization: x in [-1, 1] is placed on a uniform grid of
// 65536 points (round half up of (x + 1) * 32767.5 in fp32) and each grid
// point holds the index of the dynamic-map value nearest to it.
struct EightBitRule {
  std::array<uint8_t, 65536> code_of_point;
  uint8_t code(float x) const {
    const float t = (x + 1.0f) * 32767.5f + 0.5f;
    if (!(t >= 0.0f)) return code_of_point[0];  // NaN (an all-zero block: 0 * inf)
    const int64_t i = static_cast<int64_t>(t);
    return code_of_point[i > 65535 ? 65535 : i];
  }
};
const EightBitRule& eight_bit_rule();

}  // namespace ftcore::plugins::bnb4bit

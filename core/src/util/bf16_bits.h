// bf16 as its 16 raw bits: the rounding of an fp32 value to bf16, and back.
// Plain integer code that GCC vectorises; the functions are in an unnamed
// namespace because files built with different ISA flags include this one
// (fused_norm_rope_kernel_<isa>.cpp), and their copies must not be merged.
#pragma once

#include <cstdint>
#include <cstring>

namespace ftcore::util {
namespace {

// ATen's vectorised fp32 -> bf16 (cvtfp32_bf16): round to nearest even, NaN
// as 0xFFFF. (ATen's scalar tails write 0x7FC0 instead, so a NaN's payload
// is the one thing that may differ from ATen's casts: a NaN either way.)
inline uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t rounded = static_cast<uint16_t>((bits + ((bits >> 16) & 1u) + 0x7FFFu) >> 16);
  return value != value ? uint16_t{0xFFFF} : rounded;  // a select, so the loops vectorise
}

// bf16 (its raw bits) as fp32: exact.
inline float bf16_to_float(uint16_t bf16) {
  const uint32_t wide = static_cast<uint32_t>(bf16) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

}  // namespace
}  // namespace ftcore::util

// The GPTQ unpack loop, compiled once per ISA: gptq_kernel_<isa>.cpp defines
// FTCORE_KERNEL_FACTORY and includes this file, with -mavx2/-mavx512f set on
// that file only. Within one input row the shift, the word and the group are
// fixed, so the loop over output columns is a plain shift-mask-convert-
// multiply over __restrict pointers that vectorizes at -O3.
#include "gptq_kernel.h"

namespace ftcore::plugins::gptq {
namespace {

void dequant_rows(const DequantTile& t, int64_t row_begin, int64_t row_end) {
  const uint32_t mask = (1u << t.bits) - 1u;
  const int64_t cols = t.cols;
  for (int64_t i = row_begin; i < row_end; ++i) {
    const int64_t bit = i * t.bits, word = bit / 32;
    const uint32_t shift = static_cast<uint32_t>(bit % 32);
    const uint32_t* __restrict lo =
        reinterpret_cast<const uint32_t*>(t.qweight) + word * t.out + t.col0;
    const int64_t g = t.g_idx[i];
    const float* __restrict s = t.scales + g * t.out;
    const float* __restrict z = t.zeros + g * t.out;
    float* __restrict d = t.dst + i * cols;
    if (shift + t.bits <= 32) {
      for (int64_t c = 0; c < cols; ++c) {
        const float q = static_cast<float>(static_cast<int32_t>((lo[c] >> shift) & mask));
        d[c] = s[c] * (q - z[c]);
      }
    } else {  // 3-bit values that straddle two words
      const uint32_t* __restrict hi = lo + t.out;
      const uint32_t back = 32u - shift;
      for (int64_t c = 0; c < cols; ++c) {
        const uint32_t v = ((lo[c] >> shift) | (hi[c] << back)) & mask;
        d[c] = s[c] * (static_cast<float>(static_cast<int32_t>(v)) - z[c]);
      }
    }
  }
}

}  // namespace

DequantKernels FTCORE_KERNEL_FACTORY() { return {&dequant_rows}; }

}  // namespace ftcore::plugins::gptq

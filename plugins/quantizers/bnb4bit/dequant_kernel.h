// 4-bit dequantization kernels, compiled once per ISA (dequant_kernel_<isa>.cpp)
// and chosen at run time (sdk/cpu_isa.h).
//
// Element e of the flattened weight is nibble e of `packed` (first element
// of a byte in the high nibble) and out = code[nibble] * absmax[e / blocksize],
// the product in fp32 rounded once to the output dtype (nearest even), as
// bitsandbytes' dequantize_4bit. With double quantization the block's absmax
// is decoded once per block inside the kernel, absmax = nested_code[q] *
// nested_absmax[block / nested_blocksize] + offset (two fp32 roundings, as
// bitsandbytes' dequantize_blockwise followed by `absmax += offset`). Each
// block's 16 possible outputs are computed first; the element loop is then a
// table lookup.
#pragma once

#include <cstdint>

namespace ftcore::plugins::bnb4bit {

enum class OutType { F32 = 0, BF16 = 1, F16 = 2 };

struct DequantArgs {
  const uint8_t* packed = nullptr;
  const float* code = nullptr;  // 16 values
  int64_t blocksize = 64;
  // Plain state: one fp32 absmax per block.
  const float* absmax = nullptr;
  // Nested state (absmax == nullptr): 8-bit codes per block, decoded in the kernel.
  const uint8_t* absmax_codes = nullptr;
  const float* nested_absmax = nullptr;  // one per nested block
  const float* nested_code = nullptr;    // 256 values
  int64_t nested_blocksize = 256;
  float offset = 0.0f;
  OutType out_type = OutType::F32;
  // Non-temporal stores for the vector body: for outputs much larger than
  // the caches, where the lines would be evicted before anyone reads them.
  bool stream = false;
};

// Writes elements [begin, end) of the flattened weight to out[0 .. end - begin).
using DequantRangeFn = void (*)(const DequantArgs& args, int64_t begin, int64_t end, void* out);

struct DequantKernels {
  DequantRangeFn range;
  const char* isa;
};

extern const DequantKernels generic_dequant;
extern const DequantKernels avx2_dequant;
extern const DequantKernels avx512_dequant;

// The widest variant this CPU supports (capped by FTCORE_CPU_ISA).
const DequantKernels& dequant_kernels();

}  // namespace ftcore::plugins::bnb4bit

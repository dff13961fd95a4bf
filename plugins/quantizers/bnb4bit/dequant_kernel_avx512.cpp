// The 4-bit dequantization loop built for the avx512 instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#include <algorithm>
#define FTCORE_DEQUANT_KERNELS avx512_dequant
#define FTCORE_DEQUANT_ISA "avx512"
#include "dequant_kernel_impl.h"

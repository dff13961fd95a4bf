// The 4-bit dequantization loop built for the avx2 instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#include <algorithm>
#define FTCORE_DEQUANT_KERNELS avx2_dequant
#define FTCORE_DEQUANT_ISA "avx2"
#include "dequant_kernel_impl.h"

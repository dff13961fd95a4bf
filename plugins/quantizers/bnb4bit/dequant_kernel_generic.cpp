// The 4-bit dequantization loop built for the generic instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#include <algorithm>
#define FTCORE_DEQUANT_KERNELS generic_dequant
#define FTCORE_DEQUANT_ISA "generic"
#include "dequant_kernel_impl.h"

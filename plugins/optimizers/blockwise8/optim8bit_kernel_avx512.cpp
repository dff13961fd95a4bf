// The 8-bit optimizer element loops built for the avx512 instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY avx512_kernels
#include "optim8bit_kernel_impl.h"

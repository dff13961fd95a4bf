// The Adafactor element loops built for the avx2 instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY avx2_kernels
#include "adafactor_kernel_impl.h"

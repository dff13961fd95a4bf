// The Lion element loop built for the avx512 instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY avx512_kernels
#include "lion_kernel_impl.h"

// The Lion element loop built for the avx2 instruction set (flags in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY avx2_kernels
#include "lion_kernel_impl.h"

// The GPTQ unpack loop built for the generic instruction set (flags in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY generic_kernels
#include "gptq_kernel_impl.h"

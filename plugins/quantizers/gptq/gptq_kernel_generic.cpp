// The GPTQ unpack loop built for the generic instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY generic_kernels
#include "gptq_kernel_impl.h"

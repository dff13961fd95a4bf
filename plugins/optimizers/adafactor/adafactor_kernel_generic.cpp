// The Adafactor element loops built for the generic instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY generic_kernels
#include "adafactor_kernel_impl.h"

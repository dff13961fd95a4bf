// The Adafactor element loops built for the generic instruction set (flags in CMakeLists.txt).
#define FTCORE_KERNEL_FACTORY generic_kernels
#include "adafactor_kernel_impl.h"

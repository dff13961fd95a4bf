// The 8-bit optimizer element loops built for AVX-512 with VBMI (flags: CMakeLists.txt):
// code_search_avx512.h dequantizes with byte permutes.
#define FTCORE_KERNEL_FACTORY avx512vbmi_kernels
#include "optim8bit_kernel_impl.h"

// The dropout draws' and gradient's loops built for the avx512 instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_DROPOUT_DRAWS dropout_draws_avx512
#define FTCORE_DROPOUT_GRAD dropout_grad_avx512
#include "dropout_draws_kernel_impl.h"

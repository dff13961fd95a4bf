// The dropout draws' and gradient's loops built for the generic instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_DROPOUT_DRAWS dropout_draws_generic
#define FTCORE_DROPOUT_GRAD dropout_grad_generic
#include "dropout_draws_kernel_impl.h"

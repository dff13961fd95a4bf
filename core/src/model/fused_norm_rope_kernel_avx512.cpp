// fused_norm_rope_kernel.h's loops built for the avx512 instruction set (flags: ftcore_add_isa_sources in CMakeLists.txt).
#define FTCORE_RMS_NORM_ROWS rms_norm_rows_avx512
#define FTCORE_RMS_NORM_GRAD_ROWS rms_norm_grad_rows_avx512
#define FTCORE_ROTARY_ROWS rotary_rows_avx512
#define FTCORE_ROTARY_GRAD_ROWS rotary_grad_rows_avx512
#include "fused_norm_rope_kernel_impl.h"

// The one place ftcore instantiates at::parallel_for: this file alone is
// compiled with OpenMP (sdk/CMakeLists.txt), which makes at::parallel_for
// use libtorch's OpenMP threads (parallel.h says why that matters).
#include "ftcore/sdk/parallel.h"

#ifndef _OPENMP
#error "sdk/src/parallel.cpp must be compiled with -fopenmp, or at::parallel_for runs serially"
#endif

#include <ATen/Parallel.h>

namespace ftcore::sdk {

void parallel_for_erased(int64_t begin, int64_t end, int64_t grain, RangeBody body, const void* state) {
  at::parallel_for(begin, end, grain, [&](int64_t first, int64_t last) { body(state, first, last); });
}

}  // namespace ftcore::sdk

// Loops on libtorch's intra-op threads, for plugins and the core alike.
//
// Why not at::parallel_for: it is a header template, and its threaded body
// (ATen/ParallelOpenMP.h) is compiled in only where the including file is
// built with OpenMP (_OPENMP); anywhere else it runs the whole range on the
// calling thread, silently. ftcore's kernels ran that way until this header.
// parallel_for below is compiled once, inside libftcore_sdk with OpenMP, so
// every caller gets libtorch's threads (at::set_num_threads, which
// FTCORE_NUM_THREADS and thread sharing set) whatever its own compile flags.
#pragma once

#include <cstdint>

namespace ftcore::sdk {

// The type-erased entry point; parallel_for below is the interface.
using RangeBody = void (*)(const void* state, int64_t first, int64_t last);
void parallel_for_erased(int64_t begin, int64_t end, int64_t grain, RangeBody body, const void* state);

// Runs f(first, last) over consecutive pieces of [begin, end), at least
// `grain` long, on libtorch's threads, exactly as at::parallel_for splits
// them: serial when the range is one grain or less, when one thread is set,
// or inside another parallel region. The first exception thrown by any piece
// is rethrown here after all pieces end.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  parallel_for_erased(
      begin, end, grain, [](const void* state, int64_t first, int64_t last) { (*static_cast<const F*>(state))(first, last); },
      &f);
}

}  // namespace ftcore::sdk

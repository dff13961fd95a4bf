// Process-wide setup shared by the CLI, tests and benchmarks: libtorch's
// thread count (libtorch defaults to 1 thread on some machines; we set it
// explicitly from FTCORE_NUM_THREADS or the number of cores) and versions.
#pragma once

#include <string>

namespace ftcore {

// Sets intra-op threads; returns the count used.
int init_runtime();

// Loads libtorch's CUDA library (once); false with a reason when this
// libtorch has none or it cannot load. Only commands that may use a GPU call it.
bool load_cuda_runtime(std::string* error = nullptr);

struct VersionInfo {
  std::string ftcore, libtorch;
  int cxx11_abi = 1;
  bool cuda_in_libtorch = false;  // libtorch built with CUDA
  bool cuda_device = false;       // a CUDA device is visible now
  bool cuda_kernels = false;      // ftcore's own CUDA kernels compiled in
};
// Loads the CUDA runtime to answer the CUDA questions.
VersionInfo version_info();

}  // namespace ftcore

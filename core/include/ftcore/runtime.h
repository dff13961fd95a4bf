// Process-wide setup shared by the CLI, tests and benchmarks: libtorch's
// thread count (libtorch defaults to 1 thread on some machines; we set it
// explicitly from FTCORE_NUM_THREADS or the number of cores) and versions.
#pragma once

#include <string>

namespace ftcore {

// Sets intra-op threads; returns the count used.
int init_runtime();

struct VersionInfo {
  std::string ftcore, libtorch;
  int cxx11_abi = 1;
  bool cuda_in_libtorch = false;  // libtorch built with CUDA
  bool cuda_device = false;       // a CUDA device is visible now
  bool cuda_kernels = false;      // ftcore's own CUDA kernels compiled in
};
VersionInfo version_info();

}  // namespace ftcore

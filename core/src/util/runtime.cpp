// Thread count and version facts (see runtime.h).
#include "ftcore/runtime.h"

#include <cstdlib>
#include <thread>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include "ftcore/build_info.h"

namespace ftcore {

int init_runtime() {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("FTCORE_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) threads = n;
  }
  if (threads < 1) threads = 1;
  at::set_num_threads(threads);
  return threads;
}

VersionInfo version_info() {
  VersionInfo v;
  v.ftcore = build_info::kVersion;
  v.libtorch = build_info::kTorchVersion;
  v.cxx11_abi = build_info::kCxx11Abi;
  v.cuda_in_libtorch = load_cuda_runtime() && at::detail::getCUDAHooks().hasCUDART();
  v.cuda_device = at::globalContext().hasCUDA();
  v.cuda_kernels = build_info::kCudaKernels;
  return v;
}

}  // namespace ftcore

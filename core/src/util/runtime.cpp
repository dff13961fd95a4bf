// Thread count and version facts (see runtime.h).
#include "ftcore/runtime.h"

#include <cstdlib>
#include <string>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/util/Logging.h>

#include "ftcore/build_info.h"

namespace ftcore {

int init_runtime() {
  // c10 errors would otherwise append a symbolized C++ backtrace of dozens of
  // frames to every message a user sees; FTCORE_CPP_BACKTRACES=1 keeps them.
  const char* traces = std::getenv("FTCORE_CPP_BACKTRACES");
  if (!traces || std::string(traces) != "1") c10::SetStackTraceFetcher(std::function<std::string()>([] { return std::string(); }));

  // The rule is in runtime.h; sharing adjusts the count later (thread_sharing.cpp).
  const int threads = thread_policy().threads;
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

// libtorch's CUDA half (libtorch_cuda.so and the CUDA libraries it pulls in)
// is loaded on demand: linking it costs every process ~0.3 s of start-up on
// this machine, even `ftcore validate`. Loading it registers the CUDA
// kernels and hooks with ATen, after which at::hasCUDA() tells the truth.
#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "ftcore/build_info.h"
#include "ftcore/runtime.h"

namespace ftcore {

bool load_cuda_runtime(std::string* error) {
  static std::once_flag once;
  static bool loaded = false;
  static std::string failure;
  std::call_once(once, [] {
    const std::string path = std::string(build_info::kTorchLibDir) + "/libtorch_cuda.so";
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!handle) handle = ::dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_GLOBAL);
    if (handle) {
      loaded = true;
    } else {
      const char* e = ::dlerror();
      failure = e ? e : "libtorch_cuda.so not found";
    }
  });
  if (!loaded && error) *error = failure;
  return loaded;
}

bool nvidia_device_nodes_present() {
  std::error_code ec;
  return std::filesystem::exists("/dev/nvidiactl", ec);
}

}  // namespace ftcore

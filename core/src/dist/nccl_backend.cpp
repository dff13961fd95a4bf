// Opens libftcore_dist_nccl.so (beside libftcore) after libtorch's CUDA half
// is loaded, and builds the NCCL group through it (backends.h).
#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include <boost/dll/runtime_symbol_info.hpp>

#include "backends.h"
#include "ftcore/runtime.h"

namespace ftcore::dist {

namespace {

using MakeNccl = bool (*)(const c10::intrusive_ptr<c10d::Store>*, int, int, long long, int,
                          c10::intrusive_ptr<c10d::Backend>*, std::string*);

MakeNccl open_nccl_module() {
  std::string cuda_error;
  if (!load_cuda_runtime(&cuda_error))
    throw std::runtime_error("backend nccl needs libtorch's CUDA libraries: " + cuda_error);
  const std::string path =
      (boost::dll::this_line_location().parent_path() / "libftcore_dist_nccl.so").string();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = ::dlerror();
    throw std::runtime_error("backend nccl: cannot open " + path + " (this ftcore was built without CUDA?): " +
                             (e ? e : "unknown error"));
  }
  auto make = reinterpret_cast<MakeNccl>(::dlsym(handle, "ftcore_make_nccl_backend"));
  if (!make) throw std::runtime_error("backend nccl: " + path + " lacks ftcore_make_nccl_backend");
  return make;
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout, int device_index) {
  static const MakeNccl make = open_nccl_module();
  c10::intrusive_ptr<c10d::Backend> backend;
  std::string error;
  if (!make(&store, rank, size, static_cast<long long>(timeout.count()), device_index, &backend, &error))
    throw std::runtime_error("rank " + std::to_string(rank) + ": creating the NCCL group failed: " + error);
  return backend;
}

}  // namespace ftcore::dist

// libftcore_dist_nccl.so: the ProcessGroupNCCL constructor, in a module of
// its own because it links libtorch_cuda (and NCCL), which libftcore loads
// only on demand (core/src/util/cuda_runtime.cpp). make_nccl_backend()
// (nccl_backend.cpp) opens this file and calls the one C symbol below.
#include <exception>
#include <string>

#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

extern "C" __attribute__((visibility("default"))) bool ftcore_make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>* store, int rank, int size, long long timeout_ms, int device_index,
    c10::intrusive_ptr<c10d::Backend>* out, std::string* error) {
  try {
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = std::chrono::milliseconds(timeout_ms);
    *out = c10::make_intrusive<c10d::ProcessGroupNCCL>(*store, rank, size, options);
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

// Device discovery and the managed (unified) memory behind paged optimizer
// state: pages migrate on demand, prefetch moves them ahead of use.
#include <cuda_runtime.h>

#include <string>

#include "cuda_check.h"

namespace ftcore::cuda {

bool device_available() {
  int count = 0;
  // No driver, no device or a driver older than the runtime: all mean "no".
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  return count > 0;
}

void* managed_alloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  FTCORE_CUDA_CHECK(cudaMallocManaged(&ptr, bytes, cudaMemAttachGlobal),
                    ("ftcore::cuda::managed_alloc(" + std::to_string(bytes) + " bytes)").c_str());
  return ptr;
}

void managed_free(void* ptr) {
  if (ptr == nullptr) return;
  FTCORE_CUDA_CHECK(cudaFree(ptr), "ftcore::cuda::managed_free");
}

void prefetch(const void* ptr, size_t bytes, int device, void* stream) {
  constexpr const char* where = "ftcore::cuda::prefetch";
  detail::require(device >= -1, where, "device must be -1 (host) or a device ordinal, got " + std::to_string(device));
  if (ptr == nullptr || bytes == 0) return;
  cudaMemLocation location{};
  if (device < 0) {
    location.type = cudaMemLocationTypeHost;
    location.id = 0;  // ignored for the host
  } else {
    location.type = cudaMemLocationTypeDevice;
    location.id = device;
  }
  FTCORE_CUDA_CHECK(cudaMemPrefetchAsync(ptr, bytes, location, 0, detail::as_stream(stream)), where);
}

}  // namespace ftcore::cuda

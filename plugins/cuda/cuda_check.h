// Internal to ftcore_cuda_kernels: error checking of CUDA runtime calls and
// the launch geometry shared by the kernels' launchers. Not installed.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "cuda_kernels.h"

namespace ftcore::cuda::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* where) {
  throw std::runtime_error(std::string(where) + ": " + call + " failed: " + cudaGetErrorName(err) + " (" +
                           cudaGetErrorString(err) + ")");
}

// Every runtime call goes through this: `where` names the launcher.
#define FTCORE_CUDA_CHECK(call, where)                                              \
  do {                                                                              \
    cudaError_t ftcore_cuda_err_ = (call);                                          \
    if (ftcore_cuda_err_ != cudaSuccess)                                            \
      ::ftcore::cuda::detail::throw_cuda_error(ftcore_cuda_err_, #call, (where));   \
  } while (0)

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

inline void require(bool ok, const char* where, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(where) + ": " + what);
}

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Blocks for a grid-stride kernel: enough to fill every SM `per_sm` times,
// never more than the work needs.
inline int grid_for(int64_t work_items, int64_t items_per_block, int per_sm, const char* where) {
  int device = 0;
  int sms = 0;
  FTCORE_CUDA_CHECK(cudaGetDevice(&device), where);
  FTCORE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), where);
  const int64_t needed = (work_items + items_per_block - 1) / items_per_block;
  const int64_t cap = static_cast<int64_t>(sms) * per_sm;
  return static_cast<int>(needed < cap ? (needed > 0 ? needed : 1) : cap);
}

inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
  }
  return "unknown";
}

}  // namespace ftcore::cuda::detail

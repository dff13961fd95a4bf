// The two c10d backends ftcore builds, each behind a plain function so the
// headers they need stay in one translation unit: ProcessGroupGloo.hpp
// includes gloo's own headers (Debian's libgloo-dev, gloo_backend.cpp only),
// and ProcessGroupNCCL needs libtorch_cuda, which libftcore does not link
// (it is loaded on demand): the NCCL constructor lives in the separate module
// libftcore_dist_nccl.so, opened here only when a CUDA group is asked for.
#pragma once

#include <chrono>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace ftcore::dist {

// Gloo over TCP for CPU tensors. The network interface is GLOO_SOCKET_IFNAME
// when set (as torch.distributed reads it), else the address this host's
// name resolves to (c10d's default device).
c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout);

// NCCL for CUDA tensors on GPU `device_index`. Throws std::runtime_error
// when libftcore_dist_nccl.so (built with CUDA) or libtorch_cuda is missing.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout, int device_index);

}  // namespace ftcore::dist

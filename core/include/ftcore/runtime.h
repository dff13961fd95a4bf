// Process-wide setup shared by the CLI, tests and benchmarks: libtorch's
// thread count (libtorch defaults to 1 thread on some machines; we set it
// explicitly) and versions.
//
// Thread count, first rule that applies:
//   FTCORE_NUM_THREADS=N, else OMP_NUM_THREADS=N   fixed N (the user's choice wins)
//   FTCORE_THREAD_SHARING=0                        cores / torchrun's local workers (the old default)
//   otherwise                                      the same, then, in processes that join the
//                                                  registry (thread_registry.h), this process's
//                                                  share of the cores, re-read at every step
// ftcore sets no OpenMP variable: OMP_WAIT_POLICY / GOMP_SPINCOUNT are the user's.
#pragma once

#include <string>

namespace ftcore {

// Sets intra-op threads; returns the count used. A malformed FTCORE_NUM_THREADS,
// OMP_NUM_THREADS or FTCORE_THREAD_SHARING is a ConfigError naming it.
int init_runtime();

// How the thread count was decided (init_runtime's rule), for logs and tests.
struct ThreadPolicy {
  enum class Mode { Sharing, Fixed, Unshared };
  Mode mode = Mode::Sharing;
  int threads = 1;     // the count before any sharing
  std::string reason;  // "FTCORE_NUM_THREADS=3", "FTCORE_THREAD_SHARING=0", "sharing"
};
ThreadPolicy thread_policy();

// For commands that compute for long (run, generate, quantize): takes a slot in
// the machine-wide registry (fixed policies too, so that sharers count their
// threads) and, when sharing, sets this process's share. Idempotent.
void join_thread_sharing();

// At step boundaries: re-reads the registry and sets the share when it moved
// (another run started or ended). Does nothing unless joined and sharing.
// Returns the thread count now.
int rebalance_threads();

// Loads libtorch's CUDA library (once); false with a reason when this
// libtorch has none or it cannot load. Only commands that may use a GPU call it.
bool load_cuda_runtime(std::string* error = nullptr);

// Whether the NVIDIA driver's device nodes exist (/dev/nvidiactl): without
// them no CUDA device can be visible, so `device = "auto"` picks the CPU
// without loading libtorch_cuda and its libraries (about 190 MB of resident
// pages and a slower start on a CPU-only machine).
bool nvidia_device_nodes_present();

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

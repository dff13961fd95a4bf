// ProcessGroupGloo, constructed from libtorch's exported c10d classes. Its
// header includes gloo's headers, which the torch wheel does not ship; this
// file alone compiles against Debian's libgloo-dev headers. That is sound
// because nothing here reaches into a gloo type: the devices are opaque
// shared_ptrs made and consumed by libtorch's own (bundled) gloo, and the
// Options struct we fill holds only those pointers, a thread count and the
// timeout. Debian's libgloo.so is never linked (its symbols would clash with
// the copy inside libtorch_cpu). tests/integration/distributed_test.py proves
// the group works across real processes (and two network namespaces).
#include <cstdlib>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "backends.h"

namespace ftcore::dist {

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                    int size, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  if (interface && *interface)
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  else
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  // One background thread: collectives are issued in order from one thread,
  // and the compute threads keep the cores.
  options->threads = 1;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace ftcore::dist

// `ftcore run RECIPE --nproc-per-node N`: the short form of
//   python -m torch.distributed.run --standalone --nproc-per-node N --no-python ftcore run RECIPE ...
// on one machine. It execs torch's own launcher (torchrun, from the Python
// whose torch ftcore was built against), so a short-form run and a torchrun
// run are the same thing: same environment contract, same restarts.
#pragma once

#include <string>
#include <vector>

namespace ftcore::cli {

// Replaces this process with torchrun starting `nproc` workers of
// `ftcore run` with `run_args` (the run command's arguments without
// --nproc-per-node). Returns only on failure (throws std::runtime_error).
[[noreturn]] void exec_torchrun(int nproc, const std::vector<std::string>& run_args);

}  // namespace ftcore::cli

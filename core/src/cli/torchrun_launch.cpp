// The short form's exec of torchrun (torchrun_launch.h).
#include "torchrun_launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>

#include "ftcore/build_info.h"

namespace ftcore::cli {

void exec_torchrun(int nproc, const std::vector<std::string>& run_args) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> argv = {build_info::kTorchPython, "-m", "torch.distributed.run", "--standalone",
                                   "--nproc-per-node", std::to_string(nproc), "--no-python", self, "run"};
  argv.insert(argv.end(), run_args.begin(), run_args.end());
  std::vector<char*> c_argv;
  for (std::string& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  std::cerr << "ftcore run: starting " << nproc << " workers through torchrun\n";
  std::cerr.flush();
  ::execv(c_argv[0], c_argv.data());
  throw std::runtime_error(std::string("cannot start torchrun with ") + build_info::kTorchPython + ": " +
                           std::strerror(errno));
}

}  // namespace ftcore::cli

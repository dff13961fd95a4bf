// `ftcore --version`: ftcore, libtorch, C++ ABI, CUDA yes/no.
#include <iostream>

#include "commands.h"
#include "ftcore/runtime.h"

namespace ftcore::cli {

int print_version() {
  VersionInfo v = version_info();
  std::cout << "ftcore " << v.ftcore << "\n"
            << "libtorch " << v.libtorch << "\n"
            << "C++ ABI _GLIBCXX_USE_CXX11_ABI=" << v.cxx11_abi << "\n"
            << "CUDA " << (v.cuda_in_libtorch ? "yes" : "no") << " (libtorch built with CUDA: "
            << (v.cuda_in_libtorch ? "yes" : "no") << "; device visible: " << (v.cuda_device ? "yes" : "no")
            << "; ftcore CUDA kernels: " << (v.cuda_kernels ? "yes" : "no") << ")\n";
  return kExitOk;
}

}  // namespace ftcore::cli

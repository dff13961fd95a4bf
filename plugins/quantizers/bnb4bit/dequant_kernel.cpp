// Run-time choice of the dequantization kernel's ISA.
#include "dequant_kernel.h"

#include "ftcore/sdk/cpu_isa.h"

namespace ftcore::plugins::bnb4bit {

const DequantKernels& dequant_kernels() {
  // Read once: FTCORE_CPU_ISA is a process-wide setting.
  static const DequantKernels* chosen = [] {
    switch (sdk::detect_cpu_isa()) {
      case sdk::CpuIsa::Avx512: return &avx512_dequant;
      case sdk::CpuIsa::Avx2: return &avx2_dequant;
      default: return &generic_dequant;
    }
  }();
  return *chosen;
}

}  // namespace ftcore::plugins::bnb4bit

// The fused Lion step over all tensors: the SDK's multi-tensor scheduler
// with this plugin's per-ISA chunk kernels.
#include "lion_kernel.h"

#include "ftcore/sdk/multi_tensor.h"

namespace ftcore::plugins::lion {

void fused_lion_step(const std::vector<LionTensor>& tensors) {
  sdk::run_multi_tensor(tensors, sdk::kernels_for_this_cpu(&generic_kernels, &avx2_kernels, &avx512_kernels), "lion");
}

}  // namespace ftcore::plugins::lion

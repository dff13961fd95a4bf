// The fused AdamW step over all tensors: the SDK's multi-tensor scheduler
// with this plugin's per-ISA chunk kernels.
#include "adamw_kernel.h"

#include "ftcore/sdk/multi_tensor.h"

namespace ftcore::plugins::adamw {

void fused_adamw_step(const std::vector<AdamWTensor>& tensors) {
  sdk::run_multi_tensor(tensors, sdk::kernels_for_this_cpu(&generic_kernels, &avx2_kernels, &avx512_kernels), "adamw");
}

}  // namespace ftcore::plugins::adamw

// What optimizer/adamw_8bit, lion_8bit and paged_adamw_8bit share around the
// fused kernels (optim8bit_kernel.h): percentile clipping of one gradient and
// its history as a state slot, and the CUDA side: bitsandbytes' maps on the
// device, the 8-bit Adam and Lion launches, and bitsandbytes' 32-bit rules in
// ATen ops for tensors below min_8bit_size.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>

#include "ftcore/sdk/slot_optimizer.h"
#include "optim8bit_kernel.h"

namespace ftcore::plugins::blockwise8 {

// Whether this build has the CUDA launchers (library ftcore_cuda_kernels).
#if FTCORE_CUDA_KERNELS
inline constexpr bool kCudaKernels = true;
#else
inline constexpr bool kCudaKernels = false;
#endif

// The CPU work item of a fused step (Adam8bitTensor, Lion8bitTensor) for a
// parameter and its scalars; the caller points it at the state.
template <typename Work, typename Scalars>
Work work_item(const at::Tensor& param, const Scalars& scalars) {
  Work t;
  t.param = param.data_ptr();
  t.grad = param.grad().data_ptr();
  t.numel = param.numel();
  t.dtype = param.scalar_type();
  t.scalars = scalars;
  return t;
}

// Percentile clipping's factor for update number `step` of a parameter with
// gradient `grad` (CPU or CUDA), updating its history `gnorm_vec` (fp32[100]
// on the CPU; optim8bit_kernel.h has the rule); 1 when percentile >= 100.
float gradient_clipping_scale(const at::Tensor& grad, at::Tensor& gnorm_vec, int64_t step, int64_t percentile);

// "<param>.gnorm_vec": the history, fp32[100] on the CPU, kept with clipping
// on (percentile < 100) and read back whenever saved; `owner` names the
// optimizer when a saved one is not fp32[100].
sdk::StateSlot gnorm_history_slot(int64_t percentile, const std::string& owner);

// The signed and the unsigned map as fp32 [2, 256] on `device`, copied there
// once per device into `cache`.
const at::Tensor& device_quant_maps(at::Tensor& cache, at::Device device);

// The base of the 8-bit slot optimizers (adamw_8bit, lion_8bit): parameters
// on the CPU, or on CUDA when this build has the kernels, and bitsandbytes'
// maps cached on the CUDA device in use.
class SlotOptimizer8bit : public sdk::SlotOptimizer {
 public:
  using sdk::SlotOptimizer::SlotOptimizer;

 protected:
  void check_parameter(size_t group, size_t index) const override {
    check_fused_cpu_or_cuda_parameter(group, index, kCudaKernels);
  }

  at::Tensor device_maps_;  // [2, 256] signed, unsigned (device_quant_maps)
};

// One CUDA parameter's Adam state: 8-bit codes and absmax, or (below
// min_8bit_size) fp32 moments.
struct CudaAdamState {
  uint8_t* codes1 = nullptr;  // exp_avg
  uint8_t* codes2 = nullptr;  // exp_avg_sq
  float* absmax1 = nullptr;
  float* absmax2 = nullptr;
  at::Tensor exp_avg32, exp_avg_sq32;  // used when codes1 is null
};

// adamw_8bit's update of one CUDA parameter, as bitsandbytes computes it: the
// 8-bit launcher (maps from `maps_cache`), or the 32-bit rule in ATen ops.
// Throws std::invalid_argument when this build has no CUDA kernels.
void adam8bit_cuda_step(const at::Tensor& param, const CudaAdamState& state, const Adam8bitScalars& sc, double lr,
                        double weight_decay, std::pair<double, double> betas, int64_t step, float gnorm_scale,
                        at::Tensor& maps_cache);

// One CUDA parameter's Lion momentum: 8-bit codes and absmax, or fp32.
struct CudaLionState {
  uint8_t* codes1 = nullptr;
  float* absmax1 = nullptr;
  at::Tensor exp_avg32;  // used when codes1 is null
};

// lion_8bit's update of one CUDA parameter, as bitsandbytes computes it: the
// 8-bit launcher (the signed map from `maps_cache`), or the 32-bit rule in
// ATen ops. Throws std::invalid_argument when this build has no CUDA kernels.
void lion8bit_cuda_step(const at::Tensor& param, const CudaLionState& state, const Lion8bitScalars& sc, double lr,
                        double weight_decay, float gnorm_scale, at::Tensor& maps_cache);

}  // namespace ftcore::plugins::blockwise8

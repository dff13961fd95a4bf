// fp32 Linear layers on frozen weights through oneDNN with the weight
// reordered once into oneDNN's blocked layout (mkldnn::_reorder_linear_weight,
// mkldnn::_linear_pointwise: the ops torch.compile's CPU freezing pass uses).
//
// Why: at::linear's fp32 path is MKL's sgemm, and on the AMD EPYC build
// machines MKL takes a slow generic code path; oneDNN's packed fp32 kernels
// ran 2x (the [T, 576] x [576, 49152] lm_head) to 20x (the 576 -> 192 k/v
// projections) faster in the same run (docs/benchmarks.md). bf16 already goes
// to oneDNN (brg_matmul) in at::linear and is left alone: prepacking measured
// no gain there. The result is fp32 GEMM, summed in another order than MKL's
// (rounding-level differences, within the reference tests' 1e-5).
//
// The weight must be frozen (no grad): a trained weight would need repacking
// every step and a packed weight-gradient GEMM. Input gradients (LoRA on an
// earlier layer) flow through a second packed copy, of W^T, made on the first
// backward-recording call. On by default only off Intel CPUs, where MKL's fp32 GEMM is slow
// (packed_gemm.cpp says why); FTCORE_PACKED_GEMM=0/1 turns it off/on (A/B).
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::model {

class PackedFrozenWeight {
 public:
  // Whether y = x W^T + b takes the packed path: CPU fp32 x and W, no grad
  // for W and b in this call, no autocast, oneDNN in this libtorch, not turned off.
  static bool applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

  // y = x W^T + b, x [..., in], W [out, in]; repacks when W changed in place
  // (set_dense_weight, loading, merging bump its version counter).
  at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

 private:
  void refresh(const at::Tensor& weight, bool need_transposed);
  at::Tensor packed_, packed_transposed_;  // W [out, in] and W^T [in, out], oneDNN layout
  const void* source_ = nullptr;
  int64_t source_version_ = -1;
};

}  // namespace ftcore::model

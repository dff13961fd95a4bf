// quantizer/gptq: GPTQ post-training quantization (Frantar et al. 2022,
// https://arxiv.org/abs/2210.17323) of frozen Linear weights, stored in
// AutoGPTQ's v1 layout so transformers/optimum/GPTQModel read the result.
//
// Calibration: add_calibration(path, X [N, in]) keeps, per Linear, the
// running average H = 2 X^T X / n over all rows seen so far (fp32, as
// AutoGPTQ; n counts rows, not batches: H's scale does not change GPTQ's
// result, only its conditioning). quantize(path, W) solves (gptq_solver.h),
// packs (gptq_pack.h) and frees H.
//
// State (GptqState) and names: "<prefix>.qweight" int32 [in*bits/32, out]
// (QuantizedWeight::packed), "<prefix>.qzeros", "<prefix>.scales" fp16,
// "<prefix>.g_idx" int32; metadata "gptq.bits", "gptq.group_size",
// "gptq.sym", "gptq.desc_act", "gptq.checkpoint_format" = "gptq".
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "ftcore/sdk/params.h"
#include "ftcore/sdk/quantizer.h"
#include "gptq_kernel.h"
#include "gptq_solver.h"

namespace ftcore::plugins::gptq {

sdk::ParamSpec gptq_param_spec();
GptqConfig gptq_config_from(const sdk::Options& options);

class GptqState : public sdk::QuantState {
 public:
  PackedWeight packed;     // qweight is QuantizedWeight::packed too
  int64_t group_size = 128;
  bool sym = true, desc_act = false;

  void to_tensors(const std::string& prefix, sdk::TensorMap& out) const override;
  int64_t nbytes() const override;
};

class GptqQuantizer : public sdk::Quantizer {
 public:
  explicit GptqQuantizer(GptqConfig config);

  bool needs_calibration() const override { return true; }
  void add_calibration(const std::string& path, const at::Tensor& inputs) override;
  sdk::QuantizedWeight quantize(const std::string& path, const at::Tensor& weight) override;
  at::Tensor dequantize(const sdk::QuantizedWeight& weight, at::ScalarType dtype) const override;
  at::Tensor matmul(const at::Tensor& x, const sdk::QuantizedWeight& weight) const override;
  at::Tensor matmul_grad_input(const at::Tensor& grad_out, const sdk::QuantizedWeight& weight) const override;
  sdk::TensorMap to_tensors(const std::string& prefix, const sdk::QuantizedWeight& weight) const override;
  sdk::QuantizedWeight from_tensors(const std::string& prefix, const sdk::TensorMap& tensors) const override;

 private:
  struct Hessian {
    at::Tensor h;       // fp32 [in, in]
    int64_t rows = 0;   // calibration rows averaged into h
  };
  GptqConfig config_;
  std::mutex mutex_;
  std::map<std::string, Hessian> hessians_;
};

}  // namespace ftcore::plugins::gptq

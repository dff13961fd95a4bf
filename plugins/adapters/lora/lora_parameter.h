// LoRA on a parameter rather than a Linear slot: PEFT's target_parameters
// (peft 0.21, tuners/lora/layer.py ParamWrapper), for transformers 5's
// fused MoE tensors. The model uses forward(W) = W + delta in place of W on
// every forward (sdk::ParameterTransform); W stays frozen.
//
// A 3-D parameter W [E, out, in] (experts; gate_up_proj [E, 2F, C],
// down_proj [E, C, F]) gets one rank-r update per expert, all experts'
// factors in two matrices laid out as PEFT lays them out:
//
//   A [r*E, in]   rows e*r .. e*r+r-1 are expert e's A_e [r, in]
//   B [out, r*E]  column j*E + e is column j of expert e's B_e [out, r]
//                 (PEFT reshapes B to [out, r, E])
//   delta_e = scaling * B_e A_e                 W' = baddbmm(W, B_., A_., alpha = scaling)
//
// A 2-D parameter W [out, in] (the router gate.weight [E, C]) is a plain
// LoRA: A [r, in], B [out, r], delta = scaling * (B A).
//
// A and B are fp32 (as lora_linear.h); the factors are cast to W's dtype
// for the fold, as PEFT's get_delta_factors does.
#pragma once

#include <cstdint>
#include <memory>

#include "ftcore/sdk/model_view.h"
#include "lora_linear.h"

namespace ftcore::plugins::lora {

class ParameterLora : public sdk::ParameterTransform {
 public:
  // `experts`: E for a 3-D parameter, 1 for a 2-D one. A [r*E, in], B [out, r*E].
  ParameterLora(int64_t experts, const at::Tensor& lora_a, const at::Tensor& lora_b, double scaling);

  at::Tensor forward(const at::Tensor& base) override;
  // W + delta, the delta computed in fp32 and cast to W's dtype first (PEFT's ParamWrapper.merge).
  at::Tensor merged(const at::Tensor& base) const;

  const at::Tensor& lora_a() const { return a_->weight(); }
  const at::Tensor& lora_b() const { return b_->weight(); }
  double scaling() const { return scaling_; }

 private:
  // (B_e [E, out, r], A_e [E, r, in]) in `dtype`.
  std::pair<at::Tensor, at::Tensor> factors(c10::ScalarType dtype) const;

  int64_t experts_;
  std::shared_ptr<LoraFactor> a_, b_;
  double scaling_;
};

}  // namespace ftcore::plugins::lora

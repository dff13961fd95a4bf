// ParameterLora (lora_parameter.h): PEFT's ParamWrapper delta.
//
// Shapes: E experts, r rank, W [E, out, in] (or [out, in] with E = 1).
#include "lora_parameter.h"

#include <ATen/ATen.h>

namespace ftcore::plugins::lora {

ParameterLora::ParameterLora(int64_t experts, const at::Tensor& lora_a, const at::Tensor& lora_b, double scaling)
    : experts_(experts), scaling_(scaling) {
  a_ = register_module("lora_A", std::make_shared<LoraFactor>(lora_a));
  b_ = register_module("lora_B", std::make_shared<LoraFactor>(lora_b));
}

std::pair<at::Tensor, at::Tensor> ParameterLora::factors(c10::ScalarType dtype) const {
  const at::Tensor& a = lora_a();  // [r*E, in]
  const at::Tensor& b = lora_b();  // [out, r*E]
  const at::Tensor a_e = a.reshape({experts_, -1, a.size(1)});               // [E, r, in]
  const at::Tensor b_e = b.reshape({b.size(0), -1, experts_}).permute({2, 0, 1});  // [E, out, r]
  return {b_e.to(dtype), a_e.to(dtype)};
}

at::Tensor ParameterLora::forward(const at::Tensor& base) {
  if (base.dim() == 2) {
    // PEFT: num_experts == 1 -> lora.Linear's delta, (B A) * scaling cast to W's dtype, added to W.
    return base + (at::matmul(lora_b(), lora_a()) * scaling_).to(base.scalar_type());
  }
  // PEFT's _LoraFactorsProxy: one baddbmm, no delta tensor kept apart from W'.
  auto [lhs, rhs] = factors(base.scalar_type());
  return at::baddbmm(base, lhs, rhs, /*beta=*/1.0, /*alpha=*/scaling_);
}

at::Tensor ParameterLora::merged(const at::Tensor& base) const {
  at::NoGradGuard no_grad;
  at::Tensor delta;
  if (base.dim() == 2) {
    delta = at::matmul(lora_b(), lora_a()) * scaling_;
  } else {
    auto [lhs, rhs] = factors(at::kFloat);
    delta = at::bmm(lhs, rhs) * scaling_;  // PEFT: einsum("o r e, e r i -> e o i") * scaling
  }
  // ParamWrapper.get_delta_weight casts the delta to W's dtype before `param.data += delta`
  // (unlike lora.Linear's merge, which adds in fp32): a bf16 W rounds twice.
  return base + delta.to(base.scalar_type());
}

}  // namespace ftcore::plugins::lora

// LoraLinear and PlainLinear (lora_linear.h). The arithmetic follows PEFT's
// lora.Linear.forward and get_delta_weight op for op, so fp32 results agree
// to rounding and bf16 results round at the same places.
//
// Shapes: x [..., in]; A [r, in]; B [out, r]; W [out, in].
#include "lora_linear.h"

#include <ATen/ATen.h>

namespace ftcore::plugins::lora {

LoraLinear::LoraLinear(std::shared_ptr<sdk::LinearModule> base, const at::Tensor& lora_a, const at::Tensor& lora_b,
                       double scaling, double dropout)
    : scaling_(scaling), dropout_(dropout) {
  TORCH_CHECK(base, "LoraLinear needs a base module");
  TORCH_CHECK(lora_a.dim() == 2 && lora_a.size(1) == base->in_features(), "lora_A must be [r, ",
              base->in_features(), "], got ", lora_a.sizes());
  TORCH_CHECK(lora_b.dim() == 2 && lora_b.size(0) == base->out_features() && lora_b.size(1) == lora_a.size(0),
              "lora_B must be [", base->out_features(), ", ", lora_a.size(0), "], got ", lora_b.sizes());
  base_ = register_module("base_layer", std::move(base));
  a_ = register_module("lora_A", std::make_shared<LoraFactor>(lora_a));
  b_ = register_module("lora_B", std::make_shared<LoraFactor>(lora_b));
}

at::Tensor LoraLinear::forward(const at::Tensor& x) {
  at::Tensor result = base_->forward(x);
  const auto result_dtype = result.scalar_type();
  at::Tensor h = x.to(lora_a().scalar_type());
  if (dropout_ > 0.0) h = at::dropout(h, dropout_, is_training());
  // PEFT: result = result + lora_B(lora_A(dropout(x))) * scaling; result.to(result_dtype)
  at::Tensor update = at::linear(at::linear(h, lora_a()), lora_b()) * scaling_;
  return (result + update).to(result_dtype);
}

at::Tensor merged_weight(const at::Tensor& weight, const at::Tensor& lora_a, const at::Tensor& lora_b,
                         double scaling) {
  // PEFT computes delta = (B @ A) * scaling in the factors' dtype (fp32 here)
  // and adds it in place; the in-place add runs in fp32 and rounds once.
  at::Tensor delta = at::matmul(lora_b.to(at::kFloat), lora_a.to(at::kFloat)) * scaling;
  at::Tensor w = weight.to(at::kFloat) + delta.to(weight.device());
  return w.to(weight.scalar_type());
}

at::Tensor LoraLinear::dense_weight() const {
  at::NoGradGuard no_grad;
  return merged_weight(base_->dense_weight(), lora_a(), lora_b(), scaling_);
}

PlainLinear::PlainLinear(const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2, "PlainLinear weight must be [out, in], got ", weight.sizes());
  weight_ = register_parameter("weight", weight, weight.requires_grad());
  if (bias.defined()) bias_ = register_parameter("bias", bias, bias.requires_grad());
}

at::Tensor PlainLinear::forward(const at::Tensor& x) { return at::linear(x, weight_, bias_); }

}  // namespace ftcore::plugins::lora

// LoraLinear and PlainLinear (lora_linear.h). The arithmetic follows PEFT's
// lora.Linear.forward and get_delta_weight op for op, so fp32 results agree
// to rounding and bf16 results round at the same places.
//
// DoRA follows PEFT's DoraLinearLayer.forward and DoraLinearVariant.merge
// the same way.
//
// Shapes: x [..., in]; A [r, in]; B [out, r]; W [out, in]; m [out].
#include "lora_linear.h"

#include <ATen/ATen.h>

#include "lora_dropout.h"

namespace ftcore::plugins::lora {

LoraLinear::LoraLinear(std::shared_ptr<sdk::LinearModule> base, const at::Tensor& lora_a, const at::Tensor& lora_b,
                       double scaling, double dropout, const at::Tensor& magnitude)
    : scaling_(scaling), dropout_(dropout) {
  TORCH_CHECK(base, "LoraLinear needs a base module");
  TORCH_CHECK(lora_a.dim() == 2 && lora_a.size(1) == base->in_features(), "lora_A must be [r, ",
              base->in_features(), "], got ", lora_a.sizes());
  TORCH_CHECK(lora_b.dim() == 2 && lora_b.size(0) == base->out_features() && lora_b.size(1) == lora_a.size(0),
              "lora_B must be [", base->out_features(), ", ", lora_a.size(0), "], got ", lora_b.sizes());
  base_ = register_module("base_layer", std::move(base));
  a_ = register_module("lora_A", std::make_shared<LoraFactor>(lora_a));
  b_ = register_module("lora_B", std::make_shared<LoraFactor>(lora_b));
  if (magnitude.defined()) {
    TORCH_CHECK(magnitude.dim() == 1 && magnitude.size(0) == base_->out_features(),
                "lora_magnitude_vector must be [", base_->out_features(), "], got ", magnitude.sizes());
    magnitude_ = register_module("lora_magnitude_vector", std::make_shared<LoraFactor>(magnitude));
  }
}

at::Tensor LoraLinear::forward(const at::Tensor& x) {
  at::Tensor result = base_->forward(x);
  if (magnitude_) return dora_update(x, result);
  const auto result_dtype = result.scalar_type();
  const at::Tensor h = x.to(lora_a().scalar_type());
  // PEFT: result = result + lora_B(lora_A(dropout(x))) * scaling; result.to(result_dtype)
  const at::Tensor down =
      dropout_ > 0.0 && is_training() ? dropout_then_down_projection(h, dropout_, lora_a()) : at::linear(h, lora_a());
  at::Tensor update = at::linear(down, lora_b()) * scaling_;
  return (result + update).to(result_dtype);
}

// PEFT's DoraLinearVariant.forward + DoraLinearLayer.forward, op for op.
at::Tensor LoraLinear::dora_update(const at::Tensor& x, const at::Tensor& result) {
  const auto result_dtype = result.scalar_type();
  at::Tensor h = x.to(lora_a().scalar_type());
  const at::Tensor weight = base_->dense_weight().to(h.scalar_type());
  // x W^T without the bias: reuse the base output when the LoRA branch sees
  // the same x; with dropout active it sees dropout(x), so recompute.
  at::Tensor base_result;
  if (dropout_ > 0.0 && is_training()) {
    h = dropout_with_byte_mask(h, dropout_);
    base_result = at::linear(h, weight);
  } else {
    base_result = base_->bias().defined() ? result - base_->bias() : result;
  }
  at::Tensor weight_norm;
  {
    // n = ||W + s B A|| per row, a constant for autograd (DoRA section 4.3).
    at::NoGradGuard no_grad;
    at::Tensor lora_weight = at::matmul(lora_b(), lora_a()).to(h.scalar_type());
    weight_norm = at::linalg_vector_norm(weight + scaling_ * lora_weight, 2, {1}).to(weight.scalar_type());
  }
  const at::Tensor scale = (magnitude() / weight_norm).view({1, -1});  // m / n, [1, out]
  const at::Tensor lora_result = at::linear(at::linear(h, lora_a()), lora_b());
  const at::Tensor update = (scale - 1) * base_result + scale * lora_result * scaling_;
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

at::Tensor dora_initial_magnitude(const at::Tensor& weight) {
  at::NoGradGuard no_grad;
  return at::linalg_vector_norm(weight, 2, {1}).to(at::kFloat);
}

at::Tensor dora_merged_weight(const at::Tensor& weight, const at::Tensor& lora_a, const at::Tensor& lora_b,
                              const at::Tensor& magnitude, double scaling) {
  at::Tensor delta = at::matmul(lora_b.to(at::kFloat), lora_a.to(at::kFloat)) * scaling;
  at::Tensor v = weight.to(at::kFloat) + delta.to(weight.device());
  at::Tensor norm = at::linalg_vector_norm(v, 2, {1});
  at::Tensor factor = (magnitude.to(at::kFloat).to(weight.device()) / norm).view({-1, 1});  // m / ||V||, [out, 1]
  return (factor * v).to(weight.scalar_type());
}

at::Tensor LoraLinear::dense_weight() const {
  at::NoGradGuard no_grad;
  if (magnitude_) return dora_merged_weight(base_->dense_weight(), lora_a(), lora_b(), magnitude(), scaling_);
  return merged_weight(base_->dense_weight(), lora_a(), lora_b(), scaling_);
}

PlainLinear::PlainLinear(const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(weight.dim() == 2, "PlainLinear weight must be [out, in], got ", weight.sizes());
  weight_ = register_parameter("weight", weight, weight.requires_grad());
  if (bias.defined()) bias_ = register_parameter("bias", bias, bias.requires_grad());
}

at::Tensor PlainLinear::forward(const at::Tensor& x) { return at::linear(x, weight_, bias_); }

}  // namespace ftcore::plugins::lora

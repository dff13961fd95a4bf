// dropout_with_byte_mask (lora_dropout.h).
#include "lora_dropout.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "dropout_draws.h"

namespace ftcore::plugins::lora {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// dropout_draws.h's path: the same draws and values in one pass (fp32, contiguous, CPU).
bool torch_draws_in_one_pass(const at::Tensor& x) {
  return x.device().is_cpu() && x.scalar_type() == at::kFloat && x.is_contiguous() && draws_match_torch();
}

// noise's nonzero value s = 1 / (1 - p), rounded in x's dtype as at::dropout's div_ rounds it; 0-dim.
at::Tensor kept_value_of(const at::Tensor& x, double p) { return at::ones({}, x.options()).div_(1 - p); }

// Backward keeps the mask and s, whichever path drew them (noise = where(mask, s, 0)).
class ByteMaskDropout : public torch::autograd::Function<ByteMaskDropout> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p) {
    const at::Tensor kept_value = kept_value_of(x, p);
    if (torch_draws_in_one_pass(x)) {
      DroppedOut d = dropout_from_torch_draws(x, 1 - p, kept_value.item<float>());
      ctx->save_for_backward({d.mask, kept_value});
      return d.y;
    }
    // at::native::dropout's CPU path (_dropout_impl), call for call.
    at::Tensor noise = at::empty_like(x);
    noise.bernoulli_(1 - p);
    noise.div_(1 - p);
    at::Tensor y = x * noise;
    ctx->save_for_backward({noise.ne(0), kept_value});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& grad = grad_outputs[0];
    const at::Tensor& mask = saved[0];
    const at::Tensor& kept_value = saved[1];
    if (grad.device().is_cpu() && grad.scalar_type() == at::kFloat && mask.is_contiguous())
      return {dropout_grad(grad, mask, kept_value.item<float>()), at::Tensor()};
    return {grad * at::where(mask, kept_value, at::zeros_like(kept_value)), at::Tensor()};
  }
};

// y = at::linear(x * noise, A) whose backward keeps x, the mask and s (see the header).
// Backward makes the calls autograd made for the composition: linear's MmBackward0
// on the rows [N, in] (grad A = grad^T x_dropped, grad of x_dropped = grad A), then
// ByteMaskDropout's product, so each gradient is the same GEMM of the same bits.
class DroppedDownProjection : public torch::autograd::Function<DroppedDownProjection> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p, const at::Tensor& lora_a) {
    const at::Tensor kept_value = kept_value_of(x, p);
    DroppedOut d = dropout_from_torch_draws(x, 1 - p, kept_value.item<float>());
    ctx->save_for_backward({x, d.mask, kept_value, lora_a});
    return at::linear(d.y, lora_a);  // d.y is freed here: backward forms it again
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &mask = saved[1], &lora_a = saved[3];
    const float kept_value = saved[2].item<float>();
    const at::Tensor grad = grad_outputs[0].reshape({-1, lora_a.size(0)});  // [N, r]
    at::Tensor grad_x, grad_a;
    if (ctx->needs_input_grad(0)) grad_x = dropout_grad(grad.mm(lora_a).view(x.sizes()), mask, kept_value);
    if (ctx->needs_input_grad(1)) {  // counts tensor arguments only: lora_a
      // x * where(mask, s, 0) in one pass: the product forward formed (x is contiguous fp32 here).
      const at::Tensor dropped = dropout_grad(x, mask, kept_value);
      grad_a = grad.t().mm(dropped.view({-1, x.size(-1)}));
    }
    return {grad_x, at::Tensor(), grad_a};
  }
};

}  // namespace

at::Tensor dropout_then_down_projection(const at::Tensor& x, double p, const at::Tensor& lora_a) {
  const bool records = at::GradMode::is_enabled() && (x.requires_grad() || lora_a.requires_grad());
  if (p > 0.0 && p < 1.0 && x.numel() > 0 && records && torch_draws_in_one_pass(x) &&
      lora_a.scalar_type() == at::kFloat && lora_a.device().is_cpu() && !at::autocast::is_autocast_enabled(at::kCPU))
    return DroppedDownProjection::apply(x, p, lora_a);
  return at::linear(dropout_with_byte_mask(x, p), lora_a);
}

at::Tensor dropout_with_byte_mask(const at::Tensor& x, double p) {
  // At the ends of the range at::dropout itself; without a graph, nothing kept.
  if (!(p > 0.0 && p < 1.0) || x.numel() == 0) return at::dropout(x, p, /*train=*/true);
  if (!x.requires_grad() || !at::GradMode::is_enabled())
    return torch_draws_in_one_pass(x) ? dropout_from_torch_draws(x, 1 - p, kept_value_of(x, p).item<float>()).y
                                      : at::dropout(x, p, true);
  return ByteMaskDropout::apply(x, p);
}

}  // namespace ftcore::plugins::lora

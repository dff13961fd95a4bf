// dropout_with_byte_mask (lora_dropout.h).
#include "lora_dropout.h"

#include <ATen/ATen.h>
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

}  // namespace

at::Tensor dropout_with_byte_mask(const at::Tensor& x, double p) {
  // At the ends of the range at::dropout itself; without a graph, nothing kept.
  if (!(p > 0.0 && p < 1.0) || x.numel() == 0) return at::dropout(x, p, /*train=*/true);
  if (!x.requires_grad() || !at::GradMode::is_enabled())
    return torch_draws_in_one_pass(x) ? dropout_from_torch_draws(x, 1 - p, kept_value_of(x, p).item<float>()).y
                                      : at::dropout(x, p, true);
  return ByteMaskDropout::apply(x, p);
}

}  // namespace ftcore::plugins::lora

// dropout_with_byte_mask (lora_dropout.h).
#include "lora_dropout.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace ftcore::plugins::lora {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class ByteMaskDropout : public torch::autograd::Function<ByteMaskDropout> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, double p) {
    // at::native::dropout's CPU path (_dropout_impl), call for call.
    at::Tensor noise = at::empty_like(x);
    noise.bernoulli_(1 - p);
    noise.div_(1 - p);
    at::Tensor y = x * noise;
    ctx->save_for_backward({noise.ne(0), noise.max()});  // max: the value every kept element holds (or 0)
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor factor = at::where(saved[0], saved[1], at::zeros_like(saved[1]));
    return {grad_outputs[0] * factor, at::Tensor()};
  }
};

}  // namespace

at::Tensor dropout_with_byte_mask(const at::Tensor& x, double p) {
  // Without a graph, or at the ends of the range, at::dropout itself (nothing kept).
  if (!x.requires_grad() || !(p > 0.0 && p < 1.0) || x.numel() == 0) return at::dropout(x, p, /*train=*/true);
  return ByteMaskDropout::apply(x, p);
}

}  // namespace ftcore::plugins::lora

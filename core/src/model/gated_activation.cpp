// gated_activation (gated_activation.h).
#include "gated_activation.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "records_graph.h"
#include "reusable_in_place.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor activate(const at::Tensor& gate, bool gelu_tanh) {
  return gelu_tanh ? at::gelu(gate, "tanh") : at::silu(gate);
}

class GatedActivation : public torch::autograd::Function<GatedActivation> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up, bool gelu_tanh) {
    ctx->save_for_backward({gate, up});
    ctx->saved_data["gelu_tanh"] = gelu_tanh;
    return activate(gate, gelu_tanh) * up;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& gate = saved[0];
    const at::Tensor& up = saved[1];
    const bool gelu_tanh = ctx->saved_data["gelu_tanh"].toBool();
    const at::Tensor& grad = grad_outputs[0];
    // MulBackward0: d(a * up)/da = grad * up, d/dup = grad * a; then act's own backward.
    const at::Tensor grad_activated = grad * up;
    const at::Tensor grad_gate =
        gelu_tanh ? at::gelu_backward(grad_activated, gate, "tanh") : at::silu_backward(grad_activated, gate);
    return {grad_gate, grad * activate(gate, gelu_tanh), at::Tensor()};
  }
};

}  // namespace

at::Tensor gated_activation(at::Tensor&& gate, const at::Tensor& up, bool gelu_tanh) {
  // Mixed dtypes would need autograd's casts of each gradient; without a graph there is nothing to keep.
  const bool graph = records_graph({gate, up});
  if (!graph && !gate.is_same(up) && reusable_in_place(gate) && gate.scalar_type() == up.scalar_type() &&
      gate.sizes() == up.sizes()) {
    at::Tensor result = gate;  // act_(gate) then gate *= up: the ops above, without two [B, T, F] allocations
    gelu_tanh ? at::gelu_(result, "tanh") : at::silu_(result);
    return result.mul_(up);
  }
  if (!graph || gate.scalar_type() != up.scalar_type()) return activate(gate, gelu_tanh) * up;
  return GatedActivation::apply(gate, up, gelu_tanh);
}

}  // namespace ftcore::model

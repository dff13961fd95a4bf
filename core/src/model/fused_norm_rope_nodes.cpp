// fused_norm_rope_nodes.h: RMSNorm and RoPE as autograd nodes.
#include "fused_norm_rope_nodes.h"

#include <algorithm>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "fused_norm_rope.h"
#include "fused_norm_rope_rows.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// rms_norm_aten_chain's llama order for an fp32 x with x's two uses apart:
// `scaled` is h in h * r, `squared` the h whose mean square makes r (the same
// tensor in the model).
at::Tensor llama_chain_two_uses(const at::Tensor& scaled, const at::Tensor& squared, const at::Tensor& weight,
                                double eps) {
  return weight * (scaled * at::rsqrt(squared.pow(2).mean(-1, /*keepdim=*/true) + eps));
}

// RMSNorm (llama gain order) where a graph is recorded through x and not
// through the gain (a LoRA run's frozen norms): the row loops forward, and
// backward autograd's gradient through the chain in one pass per row
// (fused_norm_rope_kernel.h RmsNormGradRows), where the chain runs 8 ops
// forward and 13 backward and keeps x's fp32 copy and the normalised rows.
// Keeps x and the gain; recomputes the row statistic.
//
// An fp32 x is the chain's h itself (x.to(f32) is a no-op), so autograd adds
// h's two gradients into x's buffer one after the other, after whatever
// arrived first (the residual's), and fp32 addition is not associative: the
// node takes x twice, the second time as `x_for_squares`, and returns the
// two parts on the two edges, in the chain's order. A bf16 x is cast first,
// and the parts are summed before the cast back, in one tensor on the first
// edge.
class RmsNormNode : public torch::autograd::Function<RmsNormNode> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& x_for_squares,
                            const at::Tensor& weight, double eps) {
    RowDtype dtype;
    row_dtype(x, dtype);
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    ctx->saved_data["parts"] = x_for_squares.scalar_type() == at::kFloat;
    return rms_norm_rows(x, weight, eps, RmsNormStyle::llama, dtype);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "RMSNorm: no double backward (create_graph)");
    variable_list result(4);  // x, x again for the squares, then none for the gain and eps
    if (!grad_outputs[0].defined() || !ctx->needs_input_grad(0)) return result;
    const variable_list saved = ctx->get_saved_variables();
    const double eps = ctx->saved_data["eps"].toDouble();
    const bool parts = ctx->saved_data["parts"].toBool();
    const at::Tensor& grad = grad_outputs[0];
    if (!grad.is_contiguous()) {
      // The chain's row sum would then run over another layout, in another order: differentiate the chain itself.
      const at::Tensor scaled = saved[0].detach().requires_grad_(true);
      const at::Tensor squared = parts ? saved[0].detach().requires_grad_(true) : scaled;
      at::Tensor out;
      {
        at::AutoGradMode enable_grad(true);
        out = parts ? llama_chain_two_uses(scaled, squared, saved[1], eps)
                    : rms_norm_aten_chain(scaled, saved[1], eps, RmsNormStyle::llama);
      }
      const variable_list grads =
          torch::autograd::grad({out}, parts ? variable_list{scaled, squared} : variable_list{scaled}, {grad});
      std::copy(grads.begin(), grads.end(), result.begin());
      return result;
    }
    RowDtype dtype;
    row_dtype(saved[0], dtype);
    const std::vector<at::Tensor> grads = rms_norm_grad_rows(saved[0], saved[1], grad, eps, dtype, parts);
    std::copy(grads.begin(), grads.end(), result.begin());
    return result;
  }
};

// RoPE where a graph is recorded through x (not through cos and sin): the row
// loops forward, and backward the gradient autograd computes through the op
// chain (fused_norm_rope_kernel.h RotaryGradRows), in one pass each way where
// the chain runs 5 ops forward and 9 backward, two of them zero-filled
// [B, heads, T, D] tensors. Keeps cos and sin, not x.
class RotaryNode : public torch::autograd::Function<RotaryNode> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    RowDtype x_dtype, trig_dtype;
    row_dtype(x, x_dtype);
    row_dtype(cos, trig_dtype);
    ctx->save_for_backward({cos, sin});
    // x's dtype, sizes and dense layout, with no storage: what the gradient is allocated like.
    ctx->saved_data["x_layout"] = at::empty_like(x, x.options().device(at::kMeta));
    return rotary_rows(x, cos, sin, x_dtype, trig_dtype, /*may_overwrite_x=*/false);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "rotary: no double backward (create_graph)");
    variable_list result(3);  // x, then none for cos and sin
    if (!grad_outputs[0].defined() || !ctx->needs_input_grad(0)) return result;
    const variable_list saved = ctx->get_saved_variables();
    result[0] = rotary_grad_rows(grad_outputs[0], saved[0], saved[1], ctx->saved_data["x_layout"].toTensor());
    return result;
  }
};

}  // namespace

at::Tensor rms_norm_recording_x(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return RmsNormNode::apply(x, x, weight, eps);
}

at::Tensor rotary_recording_x(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return RotaryNode::apply(x, cos, sin);
}

}  // namespace ftcore::model

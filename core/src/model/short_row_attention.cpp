// short_row_math_attention (short_row_attention.h).
#include "short_row_attention.h"

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "records_graph.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The recorded graph's ops: the repetition, the casts and libtorch's math
// attention, which records its own scaling, matmuls and softmax.
at::Tensor math_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& additive_mask, int64_t groups, bool is_causal,
                          double scale) {
  // Under autocast its matmuls would round the scores to bf16 (spacing 0.25 at 32) before the softmax.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  return std::get<0>(at::_scaled_dot_product_attention_math(
      q.to(at::kFloat), repeat_kv(k, groups).to(at::kFloat), repeat_kv(v, groups).to(at::kFloat), additive_mask,
      /*dropout_p=*/0.0, is_causal, /*dropout_mask=*/std::nullopt, scale));
}

class ShortRowMathAttention : public torch::autograd::Function<ShortRowMathAttention> {
 public:
  // The mask, when present, is the node's fourth input (edge 3), never differentiated; it travels as data.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::optional<at::Tensor>& additive_mask, int64_t groups, bool is_causal,
                            double scale) {
    ctx->save_for_backward({q, k, v});
    ctx->saved_data["mask"] = additive_mask ? c10::IValue(*additive_mask) : c10::IValue();
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["is_causal"] = is_causal;
    ctx->saved_data["scale"] = scale;
    return math_attention(q, k, v, additive_mask, groups, is_causal, scale);  // grad mode is off here
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list result(7);  // q, k, v, then none for the mask, groups, is_causal and scale
    TORCH_CHECK(!at::GradMode::is_enabled(), "short-row attention: no double backward (create_graph)");
    if (!grad_outputs[0].defined()) return result;
    const variable_list saved = ctx->get_saved_variables();
    variable_list inputs, wrt;
    for (size_t i = 0; i < 3; ++i) {
      inputs.push_back(saved[i].detach().requires_grad_(ctx->needs_input_grad(i)));
      if (ctx->needs_input_grad(i)) wrt.push_back(inputs.back());
    }
    if (wrt.empty()) return result;
    at::Tensor out;
    {
      at::AutoGradMode enable_grad(true);
      const c10::IValue& mask = ctx->saved_data["mask"];
      out = math_attention(inputs[0], inputs[1], inputs[2],
                           mask.isTensor() ? std::optional<at::Tensor>(mask.toTensor()) : std::nullopt,
                           ctx->saved_data["groups"].toInt(),
                           ctx->saved_data["is_causal"].toBool(), ctx->saved_data["scale"].toDouble());
    }
    const variable_list grads = torch::autograd::grad({out}, wrt, {grad_outputs[0]}, /*retain_graph=*/false,
                                                      /*create_graph=*/false, /*allow_unused=*/true);
    size_t next = 0;
    for (size_t i = 0; i < 3; ++i)
      if (ctx->needs_input_grad(i)) result[i] = grads[next++];
    return result;
  }
};

thread_local CheckpointPass current_pass = CheckpointPass::none;

}  // namespace

CheckpointPassScope::CheckpointPassScope(CheckpointPass pass) : previous_(current_pass) { current_pass = pass; }
CheckpointPassScope::~CheckpointPassScope() { current_pass = previous_; }
CheckpointPass CheckpointPassScope::current() { return current_pass; }

at::Tensor repeat_kv(const at::Tensor& x, int64_t groups) {
  if (groups == 1) return x;
  const int64_t b = x.size(0), g = x.size(1), s = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, g, groups, s, d}).reshape({b, g * groups, s, d});
}

at::Tensor short_row_math_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const std::optional<at::Tensor>& additive_mask, int64_t groups, bool is_causal,
                                    double scale) {
  if (!records_graph({q, k, v}) || CheckpointPassScope::current() == CheckpointPass::recomputation)
    return math_attention(q, k, v, additive_mask, groups, is_causal, scale);
  TORCH_CHECK(!additive_mask || !additive_mask->requires_grad(), "short_row_math_attention: the mask takes no gradient");
  return ShortRowMathAttention::apply(q, k, v, additive_mask, groups, is_causal, scale);
}

}  // namespace ftcore::model

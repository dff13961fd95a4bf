// short_row_math_attention (short_row_attention.h).
#include "short_row_attention.h"

#include <array>
#include <cmath>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "records_graph.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The inputs as the recorded graph takes them: q, and k and v with their
// heads repeated, in fp32 (casts that are no-ops for fp32 tensors).
struct Fp32Inputs {
  at::Tensor q, k, v;
};

Fp32Inputs fp32_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t groups) {
  return {q.to(at::kFloat), repeat_kv(k, groups).to(at::kFloat), repeat_kv(v, groups).to(at::kFloat)};
}

// libtorch's math attention over fp32 inputs: its output and its softmax weights [B, H, T, S].
std::tuple<at::Tensor, at::Tensor> math_attention(const Fp32Inputs& in, const std::optional<at::Tensor>& additive_mask,
                                                  bool is_causal, double scale) {
  // Under autocast its matmuls would round the scores to bf16 (spacing 0.25 at 32) before the softmax.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  return at::_scaled_dot_product_attention_math(in.q, in.k, in.v, additive_mask, /*dropout_p=*/0.0, is_causal,
                                                /*dropout_mask=*/std::nullopt, scale);
}

// The math path's backward as autograd runs it, from its saved softmax
// weights: the same ops on the same layouts (at::matmul's reshapes of its
// operands to [B * H, rows, columns], BmmBackward0's two products for each
// batched matmul, _safe_softmax's _softmax_backward_data, the scalings by
// sqrt(scale) that libtorch applies to q and k^T before their product).
// Returns the gradients of in.q, in.k and in.v.
std::array<at::Tensor, 3> math_attention_backward(const Fp32Inputs& in, const at::Tensor& weights,
                                                  const at::Tensor& grad_out, double scale) {
  const int64_t b = in.q.size(0), h = in.q.size(1), t = in.q.size(2), d = in.q.size(3), s = in.k.size(2);
  const double root_scale = std::sqrt(scale);  // sdp::calculate_scale(q, scale).sqrt()
  const at::Tensor scaled_q = in.q * root_scale;
  const at::Tensor scaled_k_t = in.k.transpose(-2, -1) * root_scale;
  const at::Tensor grad = grad_out.reshape({b * h, t, d});
  const at::Tensor w = weights.view({b * h, t, s});
  // out = weights @ v
  const at::Tensor grad_v = at::bmm(w.transpose(1, 2), grad);
  const at::Tensor grad_w = at::bmm(grad, in.v.reshape({b * h, s, d}).transpose(1, 2));
  // weights = _safe_softmax(scores + mask); scores = scaled_q @ scaled_k_t
  const at::Tensor grad_scores =
      at::_softmax_backward_data(grad_w.view({b, h, t, s}), weights, -1, at::kFloat).view({b * h, t, s});
  const at::Tensor grad_k_t = at::bmm(scaled_q.reshape({b * h, t, d}).transpose(1, 2), grad_scores);
  const at::Tensor grad_q = at::bmm(grad_scores, scaled_k_t.reshape({b * h, d, s}).transpose(1, 2));
  return {grad_q.view({b, h, t, d}) * root_scale, (grad_k_t.view({b, h, d, s}) * root_scale).transpose(-2, -1),
          grad_v.view({b, h, s, d})};
}

class ShortRowMathAttention : public torch::autograd::Function<ShortRowMathAttention> {
 public:
  // The mask, when present, is the node's fourth input (edge 3), never differentiated; it travels as data.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const std::optional<at::Tensor>& additive_mask, int64_t groups, bool is_causal,
                            double scale) {
    auto [out, weights] = math_attention(fp32_inputs(q, k, v, groups), additive_mask, is_causal, scale);
    ctx->save_for_backward({q, k, v, weights});
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["scale"] = scale;
    return out;  // grad mode is off here
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
    // The repetition and the casts are recorded again (copies, no arithmetic),
    // so autograd sums each key/value head's groups in its own order.
    Fp32Inputs in;
    {
      at::AutoGradMode enable_grad(true);
      in = fp32_inputs(inputs[0], inputs[1], inputs[2], ctx->saved_data["groups"].toInt());
    }
    const std::array<at::Tensor, 3> grads =
        math_attention_backward(in, saved[3], grad_outputs[0], ctx->saved_data["scale"].toDouble());
    variable_list outputs, output_grads;
    const at::Tensor* fp32[3] = {&in.q, &in.k, &in.v};
    for (size_t i = 0; i < 3; ++i)
      if (ctx->needs_input_grad(i)) outputs.push_back(*fp32[i]), output_grads.push_back(grads[i]);
    const variable_list input_grads = torch::autograd::grad(outputs, wrt, output_grads, /*retain_graph=*/false,
                                                            /*create_graph=*/false, /*allow_unused=*/true);
    size_t next = 0;
    for (size_t i = 0; i < 3; ++i)
      if (ctx->needs_input_grad(i)) result[i] = input_grads[next++];
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
    return std::get<0>(math_attention(fp32_inputs(q, k, v, groups), additive_mask, is_causal, scale));
  TORCH_CHECK(!additive_mask || !additive_mask->requires_grad(), "short_row_math_attention: the mask takes no gradient");
  return ShortRowMathAttention::apply(q, k, v, additive_mask, groups, is_causal, scale);
}

}  // namespace ftcore::model

// linear_recasting_weight (recast_weight_linear.h).
#include "recast_weight_linear.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "linear_rows.h"
#include "records_graph.h"
#include "tied_embedding_gradient.h"
#include "widened_gemm.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class RecastWeightLinear : public torch::autograd::Function<RecastWeightLinear> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, at::ScalarType dtype,
                            bool tied_to_embedding) {
    const at::Tensor low_x = x.to(dtype);  // autocast's input cast (a no-op when x is already in dtype)
    ctx->save_for_backward({low_x, weight});
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["tied"] = tied_to_embedding;
    return at::_unsafe_view(low_precision_mm_casting_b(rows_of(low_x), weight.t()), sizes_with_last(x, weight.size(0)));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "recast weight linear: no double backward (create_graph)");
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& low_x = saved[0];
    const at::Tensor& weight = saved[1];
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    const at::Tensor grad = rows_of(grad_outputs[0]);  // _unsafe_view's backward
    at::Tensor grad_x, grad_weight;
    if (ctx->needs_input_grad(0)) {
      // MmBackward0 for a row-major mat1: grad.mm(mat2.t()), mat2 = weight^T.
      grad_x = low_precision_mm_casting_b(grad, weight).view(low_x.sizes()).to(x_dtype);
    }
    if (ctx->needs_input_grad(1)) {
      // mat2 = weight^T is column-major, so MmBackward0 forms (grad^T mm x)^T and
      // TBackward0 transposes it back: grad^T mm x, then ToCopyBackward0's cast.
      grad_weight = low_precision_mm_to_float(grad.t(), rows_of(low_x));  // the weight is fp32
      if (ctx->saved_data["tied"].toBool()) offer_tied_head_gradient(weight, grad_weight);
    }
    return {grad_x, grad_weight, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool recasting_weight_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                              bool tied_to_embedding) {
  const bool autocast = at::autocast::is_autocast_enabled(at::kCPU);
  // Without autocast, at::linear of an fp32 weight takes an fp32 x only (else it throws): so do we.
  const bool fp32_tied_head = !autocast && tied_to_embedding && x.scalar_type() == at::kFloat;
  return !bias.defined() && x.device().is_cpu() && weight.device().is_cpu() && (autocast || fp32_tied_head) &&
         weight.scalar_type() == at::kFloat && weight.is_leaf() && weight.is_contiguous() && records_graph({weight}) &&
         x.dim() >= 2 && x.is_contiguous() && x.is_floating_point() && x.scalar_type() != at::kDouble &&
         x.layout() == at::kStrided;
}

at::Tensor linear_recasting_weight(const at::Tensor& x, const at::Tensor& weight, bool tied_to_embedding) {
  const at::ScalarType dtype =
      at::autocast::is_autocast_enabled(at::kCPU) ? at::autocast::get_autocast_dtype(at::kCPU) : at::kFloat;
  return RecastWeightLinear::apply(x, weight, dtype, tied_to_embedding);
}

}  // namespace ftcore::model

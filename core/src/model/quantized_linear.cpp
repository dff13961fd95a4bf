// QuantizedLinear: a frozen Linear slot held by a quantizer plugin. The
// product and its activation gradient go through the quantizer (fused
// dequantize-and-multiply), so no full-precision W outlives a call.
#include <cstdint>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "ftcore/quantized_model.h"

namespace ftcore {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x -> x dequant(W)^T with W constant: backward is grad_out dequant(W).
class QuantizedMatmul : public torch::autograd::Function<QuantizedMatmul> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const QuantizedLinear* layer) {
    // The layer outlives the graph (the model holds it), so a raw pointer is enough.
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    return layer->quantizer().matmul(x, layer->weight());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto* layer = reinterpret_cast<const QuantizedLinear*>(ctx->saved_data["layer"].toInt());
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    at::Tensor grad = layer->quantizer().matmul_grad_input(grad_outputs[0], layer->weight());
    return {grad.to(dtype), at::Tensor()};
  }
};

}  // namespace

QuantizedLinear::QuantizedLinear(std::shared_ptr<sdk::Quantizer> quantizer, sdk::QuantizedWeight weight,
                                 at::Tensor bias)
    : quantizer_(std::move(quantizer)), weight_(std::move(weight)) {
  TORCH_CHECK(quantizer_, "QuantizedLinear: no quantizer");
  TORCH_CHECK(weight_.shape.size() == 2, "QuantizedLinear: the weight shape must be [out, in]");
  if (bias.defined()) bias_ = register_parameter("bias", bias.detach(), /*requires_grad=*/false);
}

at::Tensor QuantizedLinear::forward(const at::Tensor& x) {
  at::Tensor y = x.requires_grad() ? QuantizedMatmul::apply(x, this) : quantizer_->matmul(x, weight_);
  if (bias_.defined()) y = y + bias_.to(y.scalar_type());
  return y;
}

at::Tensor QuantizedLinear::dense_weight() const { return quantizer_->dequantize(weight_, weight_.dtype); }

void QuantizedLinear::set_dense_weight(const at::Tensor& weight) {
  TORCH_CHECK(weight.dim() == 2 && weight.size(0) == out_features() && weight.size(1) == in_features(),
              "set_dense_weight: ", weight.sizes(), " into a [", out_features(), ", ", in_features(), "] slot");
  if (quantizer_->needs_calibration())
    throw std::invalid_argument("a " + weight_.format +
                                " slot cannot be re-quantized without calibration activations; ReLoRA and "
                                "re-quantizing merges need a calibration-free quantizer (nf4, fp4)");
  at::NoGradGuard no_grad;
  weight_ = quantizer_->quantize("", weight.to(weight_.dtype));
}

int64_t QuantizedLinear::nbytes() const {
  int64_t bytes = weight_.packed.defined() ? weight_.packed.nbytes() : 0;
  if (weight_.state) bytes += weight_.state->nbytes();
  return bytes;
}

}  // namespace ftcore

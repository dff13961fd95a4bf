// What adapters and quantizers see of a model: its Linear slots, addressed by
// HF module path ("model.layers.3.self_attn.q_proj"), each replaceable by a
// module of the same shape; its adaptable parameters (tensors that are not a
// Linear's weight, such as MoE expert stacks, addressed by HF parameter name,
// each reparametrisable in place); and its named parameters. The core's
// model implements it; components never include core headers.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "ftcore/sdk/optimizer.h"

namespace ftcore::sdk {

// A module that can stand in a Linear slot: y = x W^T (+ b), x [..., in].
class LinearModule : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& x) = 0;
  virtual int64_t in_features() const = 0;
  virtual int64_t out_features() const = 0;
  // W [out, in] in full precision (dequantized when the slot is quantized).
  virtual at::Tensor dense_weight() const = 0;
  virtual at::Tensor bias() const { return {}; }
  // Replaces W [out, in] (ReLoRA's merge): dense slots copy it in, quantized
  // ones re-quantize it. Default: a slot that cannot take a new weight.
  virtual bool can_set_dense_weight() const { return false; }
  virtual void set_dense_weight(const at::Tensor& weight) {
    (void)weight;
    throw std::logic_error("this Linear slot cannot take a new weight");
  }
};

// Stands in for an adaptable parameter on every forward: where the model
// would use the parameter W it uses forward(W), with W's shape and dtype
// (PEFT's target_parameters: a ParamWrapper registers a torch
// parametrization W -> W + delta). W itself stays frozen and unchanged.
class ParameterTransform : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& base) = 0;
};

class ModelView {
 public:
  virtual ~ModelView() = default;
  virtual std::string architecture() const = 0;  // e.g. "LlamaForCausalLM"
  virtual int64_t num_layers() const = 0;
  virtual std::vector<std::string> linear_paths() const = 0;
  virtual std::shared_ptr<LinearModule> linear(const std::string& path) const = 0;
  virtual void replace_linear(const std::string& path, std::shared_ptr<LinearModule> module) = 0;
  virtual std::vector<NamedParameter> named_parameters() const = 0;

  // Adaptable parameters, by HF parameter name, in the model's order: MoE
  // routers "model.layers.N.mlp.gate.weight" [E, C] and expert stacks
  // "model.layers.N.mlp.experts.gate_up_proj" [E, 2F, C] and ".down_proj"
  // [E, C, F] (transformers 5's layout). None for dense models. (Declared
  // after the methods above so that plugins built before keep their vtable.)
  virtual std::vector<std::string> adaptable_parameter_paths() const { return {}; }
  // The frozen tensor itself (merging writes into it under NoGradGuard).
  virtual at::Tensor adaptable_parameter(const std::string& path) const {
    throw std::invalid_argument("no adaptable parameter '" + path + "' (this model has none)");
  }
  // Every later forward uses transform->forward(W) for W; null removes the transform.
  virtual void set_parameter_transform(const std::string& path, std::shared_ptr<ParameterTransform> transform) {
    (void)transform;
    throw std::invalid_argument("no adaptable parameter '" + path + "' (this model has none)");
  }
};

}  // namespace ftcore::sdk

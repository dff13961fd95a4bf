// What adapters and quantizers see of a model: its Linear slots, addressed by
// HF module path ("model.layers.3.self_attn.q_proj"), each replaceable by a
// module of the same shape, and its named parameters. The core's model
// implements it; components never include core headers.
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

class ModelView {
 public:
  virtual ~ModelView() = default;
  virtual std::string architecture() const = 0;  // e.g. "LlamaForCausalLM"
  virtual int64_t num_layers() const = 0;
  virtual std::vector<std::string> linear_paths() const = 0;
  virtual std::shared_ptr<LinearModule> linear(const std::string& path) const = 0;
  virtual void replace_linear(const std::string& path, std::shared_ptr<LinearModule> module) = 0;
  virtual std::vector<NamedParameter> named_parameters() const = 0;
};

}  // namespace ftcore::sdk

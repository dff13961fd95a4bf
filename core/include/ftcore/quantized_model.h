// Quantized bases (QLoRA, GPTQ): Linear slots whose frozen weight a
// quantizer plugin holds, how a model gets them, and folders that store them.
//
//   quantize_model()        replaces every Linear but lm_head with a
//                           QuantizedLinear (bitsandbytes' and GPTQ's default
//                           scope); a calibrating quantizer (GPTQ) is fed each
//                           layer's real inputs, layer by layer, with the
//                           earlier layers already quantized in the path.
//   load_quantized_model()  an HF folder whose config.json has a
//                           quantization_config (bitsandbytes 4-bit or GPTQ),
//                           written by `ftcore quantize`, transformers or AutoGPTQ.
//   quantized_state_dict() + quantization_config_json(): the reverse, for
//                           `ftcore quantize` and merges that re-quantize.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ftcore/model.h"
#include "ftcore/registry.h"
#include "ftcore/sdk/quantizer.h"

namespace ftcore {

// y = x dequant(W)^T (+ b) with W frozen and never held dense: forward calls
// the quantizer's matmul, backward its matmul_grad_input (activation
// gradients only). LoRA on top of it is QLoRA.
class QuantizedLinear : public sdk::LinearModule {
 public:
  QuantizedLinear(std::shared_ptr<sdk::Quantizer> quantizer, sdk::QuantizedWeight weight, at::Tensor bias);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t in_features() const override { return weight_.shape.at(1); }
  int64_t out_features() const override { return weight_.shape.at(0); }
  // A transient dequantized copy in the original dtype.
  at::Tensor dense_weight() const override;
  at::Tensor bias() const override { return bias_; }
  // Re-quantizes `weight` (ReLoRA's merge into a quantized base). Throws for
  // calibrating quantizers, which need activations to quantize.
  bool can_set_dense_weight() const override { return !quantizer_->needs_calibration(); }
  void set_dense_weight(const at::Tensor& weight) override;

  const sdk::QuantizedWeight& weight() const { return weight_; }
  const sdk::Quantizer& quantizer() const { return *quantizer_; }
  int64_t nbytes() const;  // packed codes + state

 private:
  std::shared_ptr<sdk::Quantizer> quantizer_;
  sdk::QuantizedWeight weight_;
  at::Tensor bias_;
};

struct QuantizationSummary {
  std::string format;        // "nf4", "fp4", "gptq"
  int64_t slots = 0;         // quantized Linear slots
  int64_t parameters = 0;    // weights they hold
  int64_t bytes = 0;         // their packed codes + state
  double bytes_per_parameter() const { return parameters ? static_cast<double>(bytes) / parameters : 0.0; }
};

// The slots a quantizer replaces: every Linear except lm_head.
std::vector<std::string> quantizable_slots(const Model& model);

// Quantizes those slots. `calibration` (token id rows, [1, T] each) is
// required by calibrating quantizers and ignored by the others.
QuantizationSummary quantize_model(Model& model, const std::shared_ptr<sdk::Quantizer>& quantizer,
                                   const std::vector<at::Tensor>& calibration);

QuantizationSummary summarize_quantization(const Model& model);

// Replaces every QuantizedLinear with a dense Linear of `dtype` (merge).
void dequantize_model(Model& model, c10::ScalarType dtype);

// True when `model_dir`'s config.json has a quantization_config.
bool is_quantized_folder(const std::filesystem::path& model_dir);

struct QuantizedModel {
  std::shared_ptr<Model> model;
  std::shared_ptr<sdk::Quantizer> quantizer;
  std::string quantizer_name;
};

// Loads a quantized folder; the quantizer plugin comes from `registry`.
// Throws ModelError naming the tensor or config key that does not fit.
QuantizedModel load_quantized_model(const std::filesystem::path& model_dir, const LoadOptions& options,
                                    const PluginRegistry& registry);

// The tensors a quantized checkpoint holds: quantized slots in their
// quantizer's names (bitsandbytes' or AutoGPTQ's), the rest in `dtype`.
sdk::TensorMap quantized_state_dict(const Model& model, c10::ScalarType dtype);

// config.json's quantization_config (JSON text) for a folder quantized by
// `quantizer_name` with `options`: transformers' BitsAndBytesConfig or
// GPTQConfig keys, so transformers loads the folder.
std::string quantization_config_json(const std::string& quantizer_name, const sdk::Options& options);

// Calibration rows: `samples` rows of `sequence_len` tokens drawn with
// `seed` from `token_rows` (each row's tokens concatenated, as GPTQ's
// tooling cuts a corpus), [1, sequence_len] int64 each.
std::vector<at::Tensor> calibration_rows(const std::vector<std::vector<int64_t>>& token_rows, int64_t samples,
                                         int64_t sequence_len, uint64_t seed);

}  // namespace ftcore

// quantize_model() and friends: which slots a quantizer takes, the
// calibration pass for quantizers that need activations (GPTQ), and the
// way back to dense weights for merges.
#include <map>
#include <random>
#include <stdexcept>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "ftcore/model_layers.h"
#include "ftcore/quantized_model.h"
#include "ftcore/stop_request.h"

namespace ftcore {

namespace {

// Stands in a slot during calibration: hands the quantizer the slot's
// inputs as [N, in] fp32 rows, then computes what the slot computes.
class RecordingLinear : public sdk::LinearModule {
 public:
  RecordingLinear(std::string path, std::shared_ptr<sdk::LinearModule> inner, sdk::Quantizer& quantizer)
      : path_(std::move(path)), inner_(std::move(inner)), quantizer_(quantizer) {}
  at::Tensor forward(const at::Tensor& x) override {
    quantizer_.add_calibration(path_, x.detach().reshape({-1, in_features()}).to(at::kFloat));
    return inner_->forward(x);
  }
  int64_t in_features() const override { return inner_->in_features(); }
  int64_t out_features() const override { return inner_->out_features(); }
  at::Tensor dense_weight() const override { return inner_->dense_weight(); }
  at::Tensor bias() const override { return inner_->bias(); }

 private:
  std::string path_;
  std::shared_ptr<sdk::LinearModule> inner_;
  sdk::Quantizer& quantizer_;
};

std::shared_ptr<QuantizedLinear> quantized_slot(const std::shared_ptr<sdk::Quantizer>& quantizer,
                                                const std::string& path, const sdk::LinearModule& dense) {
  at::NoGradGuard no_grad;
  sdk::QuantizedWeight weight = quantizer->quantize(path, dense.dense_weight().detach());
  const at::Tensor bias = dense.bias();
  return std::make_shared<QuantizedLinear>(quantizer, std::move(weight), bias.defined() ? bias.detach() : bias);
}

std::string layer_prefix(int64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace

std::vector<std::string> quantizable_slots(const Model& model) {
  std::vector<std::string> slots;
  for (const std::string& path : model.linear_paths())
    if (path != "lm_head") slots.push_back(path);
  return slots;
}

QuantizationSummary quantize_model(Model& model, const std::shared_ptr<sdk::Quantizer>& quantizer,
                                   const std::vector<at::Tensor>& calibration) {
  const std::vector<std::string> slots = quantizable_slots(model);
  if (!quantizer->needs_calibration()) {
    for (const std::string& path : slots) {
      throw_if_stop_requested("quantization");
      model.replace_linear(path, quantized_slot(quantizer, path, *model.linear(path)));
    }
    return summarize_quantization(model);
  }
  if (calibration.empty())
    throw std::invalid_argument("this quantizer needs calibration activations: give calibration rows "
                                "(the recipe's [calibration] section, or --calibration-data)");
  std::map<int64_t, std::vector<std::string>> by_layer;
  for (const std::string& path : slots)
    for (int64_t i = 0; i < model.num_layers(); ++i)
      if (path.rfind(layer_prefix(i), 0) == 0) by_layer[i].push_back(path);
  std::map<std::string, std::shared_ptr<sdk::LinearModule>> originals;
  model.run_layerwise(
      calibration,
      [&](int64_t layer) {
        throw_if_stop_requested("calibration");
        for (const std::string& path : by_layer[layer]) {
          originals[path] = model.linear(path);
          model.replace_linear(path, std::make_shared<RecordingLinear>(path, originals[path], *quantizer));
        }
      },
      [&](int64_t layer) {
        for (const std::string& path : by_layer[layer]) {
          throw_if_stop_requested("quantization");
          model.replace_linear(path, quantized_slot(quantizer, path, *originals[path]));
          originals.erase(path);
        }
        spdlog::info("quantized layer {} of {} ({} slots)", layer + 1, model.num_layers(), by_layer[layer].size());
      });
  return summarize_quantization(model);
}

QuantizationSummary summarize_quantization(const Model& model) {
  QuantizationSummary summary;
  for (const std::string& path : model.linear_paths()) {
    auto slot = std::dynamic_pointer_cast<QuantizedLinear>(model.linear(path));
    if (!slot) continue;
    summary.format = slot->weight().format;
    summary.slots += 1;
    summary.parameters += slot->in_features() * slot->out_features();
    summary.bytes += slot->nbytes();
  }
  return summary;
}

void dequantize_model(Model& model, c10::ScalarType dtype) {
  at::NoGradGuard no_grad;
  for (const std::string& path : model.linear_paths()) {
    auto slot = std::dynamic_pointer_cast<QuantizedLinear>(model.linear(path));
    if (!slot) continue;
    const at::Tensor bias = slot->bias();
    const at::Tensor weight = slot->dense_weight();
    auto dense = std::make_shared<model::DenseLinear>(slot->in_features(), slot->out_features(), bias.defined(),
                                                      weight.options().dtype(dtype));
    dense->set_dense_weight(weight);
    if (bias.defined()) dense->bias().copy_(bias);
    for (auto& p : dense->parameters()) p.set_requires_grad(false);
    model.replace_linear(path, dense);
  }
}

std::vector<at::Tensor> calibration_rows(const std::vector<std::vector<int64_t>>& token_rows, int64_t samples,
                                         int64_t sequence_len, uint64_t seed) {
  std::vector<int64_t> stream;
  for (const auto& row : token_rows) stream.insert(stream.end(), row.begin(), row.end());
  if (samples < 1 || sequence_len < 1) throw std::invalid_argument("calibration: samples and sequence_len must be >= 1");
  if (static_cast<int64_t>(stream.size()) < sequence_len)
    throw std::invalid_argument("calibration: the data holds " + std::to_string(stream.size()) +
                                " tokens, fewer than one row of sequence_len = " + std::to_string(sequence_len));
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int64_t> start(0, static_cast<int64_t>(stream.size()) - sequence_len);
  std::vector<at::Tensor> rows;
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t s = start(generator);
    rows.push_back(at::tensor(std::vector<int64_t>(stream.begin() + s, stream.begin() + s + sequence_len),
                              at::kLong).unsqueeze(0));
  }
  return rows;
}

}  // namespace ftcore

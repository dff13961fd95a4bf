// Model::run_layerwise: the decoder one layer at a time over calibration
// rows (GPTQ's sequential quantization, Frantar et al. 2022, section 4:
// each layer is quantized on inputs that already went through the
// quantized earlier layers).
#include <ATen/ATen.h>

#include "ftcore/model.h"
#include "ftcore/model_layers.h"

namespace ftcore {

void Model::run_layerwise(const std::vector<at::Tensor>& rows, const std::function<void(int64_t)>& before_layer,
                          const std::function<void(int64_t)>& after_layer) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> hidden;
  std::vector<model::AttentionInputs> inputs;
  for (const at::Tensor& row : rows) {
    TORCH_CHECK(row.dim() == 2 && row.size(0) == 1, "calibration rows must be [1, T], got ", row.sizes());
    const at::Tensor ids = row.to(device(), at::kLong);
    const at::Tensor seq = model::resolve_sequence_ids(ids, at::Tensor(), at::Tensor());
    inputs.push_back(attention_inputs(seq, at::Tensor(), model::default_positions(seq, at::Tensor())));
    hidden.push_back(embed(ids));
  }
  const auto& layers = net_->model->layers;
  for (int64_t i = 0; i < static_cast<int64_t>(layers.size()); ++i) {
    before_layer(i);
    for (size_t r = 0; r < hidden.size(); ++r) layers[i]->forward(hidden[r], inputs[r], nullptr);
    after_layer(i);
    for (size_t r = 0; r < hidden.size(); ++r) hidden[r] = layers[i]->forward(hidden[r], inputs[r], nullptr);
  }
}

}  // namespace ftcore

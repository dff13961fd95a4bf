// Summed next-token cross-entropy over target positions only.
#include "next_token_loss.h"

#include <ATen/ATen.h>

#include "consuming_cross_entropy.h"
#include "ftcore/model_moe.h"

namespace ftcore::train {

at::Tensor summed_next_token_loss(Model& model, const TrainBatch& batch, at::Tensor* router_aux_loss) {
  const c10::Device device = model.device();
  const ModelConfig& config = model.config();
  ForwardInput input;
  input.input_ids = batch.input_ids;
  input.sequence_ids = batch.sequence_ids;
  input.position_ids = batch.position_ids;
  model::RouterLogits router;
  const bool with_aux = router_aux_loss && config.is_moe() && config.output_router_logits;
  if (with_aux) input.router_logits = &router;
  const at::Tensor hidden = model.forward_hidden(input);  // [B, T, C]
  if (with_aux)  // transformers weights the tokens by the attention mask: padding (sequence id -1) is left out
    *router_aux_loss = load_balancing_loss(router, config.num_experts, config.num_experts_per_tok,
                                           batch.sequence_ids.to(device).ge(0));
  const int64_t T = hidden.size(1), C = hidden.size(2);
  if (T < 2) return hidden.sum().to(at::kFloat) * 0.0;
  const at::Tensor next_labels = batch.labels.narrow(1, 1, T - 1).reshape(-1).to(device);  // [B*(T-1)]
  const at::Tensor positions = (next_labels != kIgnoreLabel).nonzero().squeeze(1);
  if (positions.numel() == 0) return hidden.sum().to(at::kFloat) * 0.0;
  const at::Tensor h = hidden.narrow(1, 0, T - 1).reshape({-1, C}).index_select(0, positions);  // [N, C]
  const at::Tensor logits = model.compute_logits(h).to(at::kFloat).contiguous();  // [N, V]
  const at::Tensor targets = next_labels.index_select(0, positions);
  if (!logits.is_cpu()) return at::cross_entropy_loss(logits, targets, {}, at::Reduction::Sum);
  return consuming_cross_entropy_sum(logits, targets);  // consumes the logits
}

}  // namespace ftcore::train

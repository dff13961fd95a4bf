// The decoder-only causal language model of every supported family
// (supported_architectures(): Llama, Mistral, Qwen2/3, SmolLM3, OLMo 2,
// Granite, Gemma 2/3, Phi-3/4) as transformers computes each, loaded from an
// HF folder. One decoder; ModelConfig's switches add each family's pieces.
//
// Shapes: B batch rows, T new tokens per row, S keys per row (cached + new),
// C hidden size, V vocabulary; H query heads, G key/value heads, D head size.
//
//   x = embed(ids) * embedding_multiplier                   [B, T, C]
//   per layer: x += o_proj(attention(rope(q), rope(k), v))  RMSNorm first (Llama)
//              x += down(act(gate(n)) * up(n))             n = RMSNorm(x)
//   logits = lm_head(RMSNorm(x))                            [B, T, V]
// (norm placement, q/k norms, multipliers, soft-caps: model_config.h)
//
// One row may hold padding (attention_mask, either side) or several packed
// sequences (sequence_ids): positions restart at each sequence, and no token
// attends to another sequence's tokens or to padding. Every Linear is a named
// slot ("model.layers.3.self_attn.q_proj") that adapters and quantizers can
// replace through sdk::ModelView.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/TensorOptions.h>
#include <torch/nn/module.h>

#include "ftcore/model_cache.h"
#include "ftcore/model_config.h"
#include "ftcore/sdk/model_view.h"

namespace ftcore {

namespace model {
class CausalLM;
class RotaryEmbedding;
struct AttentionInputs;
}

struct LoadOptions {
  // Unset: the checkpoint's dtype (config.json's torch_dtype / dtype, else
  // the stored tensors'). Weights are converted once, at load.
  std::optional<c10::ScalarType> dtype;
  c10::Device device = c10::kCPU;
};

struct ForwardInput {
  at::Tensor input_ids;       // [B, T] int64
  at::Tensor attention_mask;  // optional [B, T]: 1 token, 0 padding (left or right)
  // optional [B, T] (any integer type): packed rows, one id (>= 0) per
  // sequence, -1 for padding (collate.h's sequence_ids). Tokens attend only
  // within their own sequence. Given with attention_mask, the two must agree.
  at::Tensor sequence_ids;
  // optional [B, T]; by default each token's index within its sequence
  // (padding skipped), counted on from what the cache holds.
  at::Tensor position_ids;
  KVCache* cache = nullptr;    // generation: earlier keys/values, appended to (inference only)
  // MoE models: receives each sparse layer's router logits [B*T, E] (model_moe.h).
  std::vector<at::Tensor>* router_logits = nullptr;
  int64_t logits_to_keep = 0;  // 0: logits for all T positions; n: for the last n
};

class Model : public sdk::ModelView {
 public:
  // Reads config.json and model.safetensors (or the shards of
  // model.safetensors.index.json). Throws ModelError naming what is wrong.
  static std::shared_ptr<Model> from_pretrained(const std::filesystem::path& model_dir,
                                                const LoadOptions& options = {});

  // A model with uninitialised weights of `options`' dtype and device; the
  // loader (load_weights) or the caller fills them.
  Model(ModelConfig config, const c10::TensorOptions& options);
  ~Model() override;

  // Logits [B, T or logits_to_keep, V] in the model's dtype.
  at::Tensor forward(const ForwardInput& input);
  // The final-norm hidden states [B, T, C] (the trainer's chunked loss uses them).
  at::Tensor forward_hidden(const ForwardInput& input);
  at::Tensor compute_logits(const at::Tensor& hidden);  // lm_head: [..., C] -> [..., V]

  // Recompute each decoder layer in backward instead of keeping its
  // activations (less memory, one more forward per layer). Gradients are the
  // same as without it. Only applies when grad mode is on and no cache is used.
  void set_gradient_checkpointing(bool enabled) { checkpointing_ = enabled; }
  bool gradient_checkpointing() const { return checkpointing_; }

  // NEFTune (Jain et al., https://arxiv.org/abs/2310.05914): in training mode
  // with grad on, embeddings get uniform noise in +-alpha/sqrt(T*C), drawn
  // from the default generator, as transformers' neftune hook adds. 0: off.
  void set_neftune_noise_alpha(double alpha) { neftune_alpha_ = alpha; }

  // Calibration (GPTQ): runs `rows` (input ids [1, T] each) through the
  // decoder one layer at a time, without grad. For each layer i:
  // before_layer(i) (e.g. wraps its Linear slots to record their inputs),
  // layer i on every row, after_layer(i) (e.g. quantizes those slots), then
  // layer i again on every row so that layer i+1 sees what the modified
  // layer computes. Keeps only one layer's inputs per row.
  void run_layerwise(const std::vector<at::Tensor>& rows, const std::function<void(int64_t)>& before_layer,
                     const std::function<void(int64_t)>& after_layer);

  // Keeps every frozen fp32 dense Linear weight in `dtype` only
  // (DenseLinear::keep_frozen_weight_in); returns the fp32 bytes dropped.
  int64_t keep_frozen_linear_weights_in(at::ScalarType dtype);

  const ModelConfig& config() const { return config_; }
  c10::ScalarType dtype() const;
  c10::Device device() const;
  // The module tree (HF parameter names; train()/eval(), parameters()).
  torch::nn::Module& module();

  // Copies safetensors weights (HF names) into the parameters, converting
  // dtype and device; all missing, unexpected and mis-shaped tensors are
  // reported in one ModelError. `origin` names the source in errors.
  void load_weights(const std::vector<std::pair<std::string, at::Tensor>>& tensors, const std::string& origin);

  // sdk::ModelView
  std::string architecture() const override { return config_.architecture; }
  int64_t num_layers() const override { return config_.num_layers; }
  std::vector<std::string> linear_paths() const override;
  std::shared_ptr<sdk::LinearModule> linear(const std::string& path) const override;
  void replace_linear(const std::string& path, std::shared_ptr<sdk::LinearModule> module) override;
  // Each tensor once: with tied embeddings lm_head.weight is
  // model.embed_tokens.weight and is listed under that name only.
  std::vector<sdk::NamedParameter> named_parameters() const override;
  // MoE routers and expert stacks (model_moe.h; adaptable_parameters.cpp).
  std::vector<std::string> adaptable_parameter_paths() const override;
  at::Tensor adaptable_parameter(const std::string& path) const override;
  void set_parameter_transform(const std::string& path, std::shared_ptr<sdk::ParameterTransform> transform) override;

 private:
  ModelConfig config_;
  std::shared_ptr<model::CausalLM> net_;
  // Token embeddings times the family's embedding multiplier. [B, T] -> [B, T, C]
  at::Tensor embed(const at::Tensor& ids) const;
  // Rotary tables and masks shared by every layer of one forward.
  model::AttentionInputs attention_inputs(const at::Tensor& sequence_ids, const at::Tensor& past_sequence_ids,
                                          const at::Tensor& positions) const;

  std::shared_ptr<const model::RotaryEmbedding> rope_, sliding_rope_;  // sliding_rope_: config.sliding_rope only
  bool checkpointing_ = false;
  double neftune_alpha_ = 0.0;
};

// Every tensor of an HF folder's model.safetensors (or its shards), by name,
// memory-mapped. Throws ModelError when there are none or only .bin files.
std::vector<std::pair<std::string, at::Tensor>> read_model_tensors(const std::filesystem::path& model_dir);

}  // namespace ftcore

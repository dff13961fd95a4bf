// The building blocks of ftcore::Model (model.h), as torch::nn::Modules whose
// registered names are transformers' (model.layers.N.self_attn.q_proj ...),
// so named parameters and Linear slot paths are HF module paths.
//
// Shapes: B batch, T new tokens, S keys (cached + new), C hidden,
// H query heads, G key/value heads, D head size, F the MLP width.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "ftcore/model_cache.h"
#include "ftcore/model_config.h"
#include "ftcore/model_moe.h"
#include "ftcore/sdk/model_view.h"

namespace ftcore::model {

// y = x W^T + b, W [out, in]: the module every Linear slot starts with.
class DenseLinear : public sdk::LinearModule {
 public:
  DenseLinear(int64_t in_features, int64_t out_features, bool with_bias, const c10::TensorOptions& options);
  // Shares `weight` (tied lm_head = embed_tokens.weight).
  explicit DenseLinear(const at::Tensor& weight);
  at::Tensor forward(const at::Tensor& x) override;
  int64_t in_features() const override { return weight_.size(1); }
  int64_t out_features() const override { return weight_.size(0); }
  // Both throw std::logic_error once the weight is kept in the compute dtype
  // only (below): its fp32 values are gone.
  at::Tensor dense_weight() const override;
  at::Tensor bias() const override { return bias_; }
  bool can_set_dense_weight() const override { return !compute_dtype_only_; }
  void set_dense_weight(const at::Tensor& weight) override;

  // Keeps a frozen fp32 weight in `dtype` (the run's autocast dtype) only,
  // for good: the same values autocast's cast gives, so every product is
  // unchanged, without the fp32 copy. Only for runs whose adapter never
  // reads the base weight again (sdk::BaseWeightUse). Skips a trainable,
  // non-fp32 or shared (tied) weight. Returns the fp32 bytes dropped (the
  // autocast cast of them, which this replaces, was as large again in bf16).
  int64_t keep_frozen_weight_in(at::ScalarType dtype);

 private:
  // Under autocast, a frozen fp32 weight in the autocast dtype, cast once and
  // again only when the weight changes (its version or storage), instead of
  // by autocast on every forward (issue #14: the casts were ~6% of a bf16
  // LoRA step). The values are those autocast's cast gives.
  const at::Tensor& weight_for_autocast();

  at::Tensor weight_, bias_;
  bool shares_weight_ = false;       // tied lm_head: the embedding reads the same tensor in fp32
  bool compute_dtype_only_ = false;  // keep_frozen_weight_in was applied
  at::Tensor autocast_weight_;
  const void* autocast_source_ = nullptr;
  int64_t autocast_version_ = -1;
  // fp32 frozen weights reordered for oneDNN (packed_gemm.h); a pointer so
  // this header does not carry the packing code.
  std::shared_ptr<class PackedFrozenWeight> packed_;
};

class Embedding : public torch::nn::Module {
 public:
  Embedding(int64_t vocab_size, int64_t hidden_size, const c10::TensorOptions& options);
  at::Tensor forward(const at::Tensor& ids) const;  // [B, T] -> [B, T, C]
  const at::Tensor& weight() const { return weight_; }

 private:
  at::Tensor weight_;
};

// RMSNorm (Zhang & Sennrich, https://arxiv.org/abs/1910.07467):
// y = w * (x / sqrt(mean(x^2) + eps)), the statistic in fp32; `style` says
// where the gain is applied (model_config.h RmsNormStyle).
class RmsNorm : public torch::nn::Module {
 public:
  RmsNorm(int64_t size, double eps, RmsNormStyle style, const c10::TensorOptions& options);
  at::Tensor forward(const at::Tensor& x) const;

 private:
  at::Tensor weight_;
  double eps_;
  RmsNormStyle style_;
};

// Rotary position embedding tables for one forward call, for `rope` (the
// config's `rope` or its `sliding_rope`) on heads of config.head_dim.
class RotaryEmbedding {
 public:
  RotaryEmbedding(const ModelConfig& config, const RopeConfig& rope);
  // cos, sin [B, T, R] in `dtype` for positions [B, T]; R = rotary_dim().
  std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& positions, c10::ScalarType dtype) const;
  // The inverse frequencies [R/2] (fp32) a forward whose largest position + 1 is `seq_len` uses.
  at::Tensor inverse_frequencies(int64_t seq_len) const;
  int64_t rotary_dim() const { return rotary_dim_; }  // int(D * partial_rotary_factor)

 private:
  ModelConfig config_;
  RopeConfig rope_;
  int64_t rotary_dim_;
  at::Tensor base_inv_freq_;  // fp32, CPU
  at::Tensor long_inv_freq_;  // longrope only
};

// How one layer's attention is masked: is_causal with no mask (plain causal
// rows), or a boolean mask [B, 1, T, S] (true = may attend).
struct AttentionMask {
  at::Tensor mask;
  bool is_causal = false;
  // `mask` as fp32 0 / -inf, built by the first layer whose attention needs
  // it (the short-row math path) and reused by the others of the forward,
  // also through the copies gradient checkpointing keeps for each layer.
  std::shared_ptr<at::Tensor> additive_fp32 = std::make_shared<at::Tensor>();
};

// Everything attention needs that is the same for all layers of a forward.
struct AttentionInputs {
  at::Tensor cos, sin;                    // [B, T, R]
  at::Tensor sliding_cos, sliding_sin;    // for sliding-window layers when config.sliding_rope is set
  std::map<int64_t, AttentionMask> masks;  // by sliding window (0 = full attention)
  RouterLogits* router_logits = nullptr;   // MoE layers append their router logits here when set
  const AttentionMask& mask_for(int64_t window) const { return masks.at(window); }
};

// Sequence ids [B, T] (>= 0 tokens, -1 padding) from a ForwardInput's
// sequence_ids, else its attention_mask, else all zeros.
at::Tensor resolve_sequence_ids(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                const at::Tensor& sequence_ids);
// Each token's index within its own sequence, counting the cached ones
// (`past` [B, S] or undefined); padding gets 0. [B, T] int64.
at::Tensor default_positions(const at::Tensor& sequence_ids, const at::Tensor& past_sequence_ids);
// Query i (absolute index past + i) may attend key j when j <= past + i,
// both carry the same id >= 0, and (with a window W) past + i - j < W;
// a padding query attends to itself only, so no softmax row is empty.
AttentionMask build_attention_mask(const at::Tensor& sequence_ids, const at::Tensor& past_sequence_ids,
                                   int64_t window);

// Grouped-query attention with RoPE, optional q/k RMSNorm and score
// soft-capping. The projections are q/k/v_proj, or one qkv_proj when
// config.fused_qkv (the unused slots stay null).
class Attention : public torch::nn::Module {
 public:
  Attention(const ModelConfig& config, int64_t layer_index, const c10::TensorOptions& options);
  at::Tensor forward(const at::Tensor& x, const AttentionInputs& inputs, KVCache* cache);  // [B,T,C]
  std::shared_ptr<sdk::LinearModule> q_proj, k_proj, v_proj, qkv_proj, o_proj;
  std::shared_ptr<RmsNorm> q_norm, k_norm;  // null unless config.qk_norm

 private:
  // q [B, T, H*D], k and v [B, T, G*D].
  std::tuple<at::Tensor, at::Tensor, at::Tensor> project(const at::Tensor& x);
  // q [B, H, T, D]; k, v [B, G, S, D], each key/value head serving H / G query heads.
  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionMask& mask) const;
  int64_t layer_index_, num_heads_, num_kv_heads_, head_dim_, window_;
  QkNorm qk_norm_;
  bool uses_rope_, uses_sliding_rope_;
  double scale_, softcap_;
};

// Gated MLP, down(act(gate(x)) * up(x)): SwiGLU with silu (Shazeer,
// https://arxiv.org/abs/2002.05202), GeGLU with gelu (tanh). gate/up_proj,
// or one gate_up_proj when config.fused_gate_up.
class Mlp : public torch::nn::Module {
 public:
  Mlp(const ModelConfig& config, const c10::TensorOptions& options);
  at::Tensor forward(const at::Tensor& x);
  std::shared_ptr<sdk::LinearModule> gate_proj, up_proj, gate_up_proj, down_proj;

 private:
  bool gelu_;
};

// One residual layer; which norms exist follows config.norm_placement
// (model_config.h), the others stay null.
class DecoderLayer : public torch::nn::Module {
 public:
  DecoderLayer(const ModelConfig& config, int64_t layer_index, const c10::TensorOptions& options);
  at::Tensor forward(const at::Tensor& x, const AttentionInputs& inputs, KVCache* cache);
  std::shared_ptr<Attention> self_attn;
  // Registered as "mlp" either way: the dense SwiGLU, or (config.sparse_layers) the MoE block.
  std::shared_ptr<Mlp> mlp;
  std::shared_ptr<SparseMoeBlock> moe;
  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;

 private:
  NormPlacement placement_;
  double residual_multiplier_;
};

// Runs `layer` without keeping its activations; backward recomputes them
// (the layer must be deterministic: no dropout here, so it is).
at::Tensor checkpoint_layer(const std::shared_ptr<DecoderLayer>& layer, const at::Tensor& x,
                            const AttentionInputs& inputs);

// "model" (embed_tokens, layers.N, norm) and "lm_head", as in transformers.
class DecoderStack : public torch::nn::Module {
 public:
  DecoderStack(const ModelConfig& config, const c10::TensorOptions& options);
  std::shared_ptr<Embedding> embed_tokens;
  std::vector<std::shared_ptr<DecoderLayer>> layers;
  std::shared_ptr<RmsNorm> norm;
};

class CausalLM : public torch::nn::Module {
 public:
  CausalLM(const ModelConfig& config, const c10::TensorOptions& options);
  std::shared_ptr<DecoderStack> model;
  std::shared_ptr<sdk::LinearModule> lm_head;
};

}  // namespace ftcore::model

// The decoder's modules (model_layers.h): the dense Linear slot, embedding,
// RMSNorm, grouped-query attention with RoPE through
// at::scaled_dot_product_attention, the SwiGLU MLP and the pre-norm residual
// layer, registered under transformers' names. The arithmetic follows
// transformers' modeling_llama.py op for op (RMSNorm's fp32 statistic, cos/sin
// cast to the activations' dtype) so fp32 logits agree to rounding.
//
// Shapes: B batch, T new tokens, S keys, C hidden, H query heads,
// G key/value heads, D head size, F MLP width.
#include <cmath>

#include <ATen/ATen.h>

#include "ftcore/model_layers.h"

namespace ftcore::model {

DenseLinear::DenseLinear(int64_t in_features, int64_t out_features, bool with_bias, const c10::TensorOptions& options) {
  weight_ = register_parameter("weight", at::empty({out_features, in_features}, options));
  if (with_bias) bias_ = register_parameter("bias", at::empty({out_features}, options));
}

DenseLinear::DenseLinear(const at::Tensor& weight) { weight_ = register_parameter("weight", weight); }

at::Tensor DenseLinear::forward(const at::Tensor& x) { return at::linear(x, weight_, bias_); }

void DenseLinear::set_dense_weight(const at::Tensor& weight) {
  TORCH_CHECK(weight.sizes() == weight_.sizes(), "set_dense_weight: ", weight.sizes(), " into a ", weight_.sizes(),
              " slot");
  at::NoGradGuard no_grad;
  weight_.copy_(weight);
}

Embedding::Embedding(int64_t vocab_size, int64_t hidden_size, const c10::TensorOptions& options) {
  weight_ = register_parameter("weight", at::empty({vocab_size, hidden_size}, options));
}

at::Tensor Embedding::forward(const at::Tensor& ids) const { return at::embedding(weight_, ids); }

RmsNorm::RmsNorm(int64_t hidden_size, double eps, const c10::TensorOptions& options) : eps_(eps) {
  weight_ = register_parameter("weight", at::ones({hidden_size}, options));
}

at::Tensor RmsNorm::forward(const at::Tensor& x) const {
  // The statistic in fp32 whatever the dtype; rounded back before the gain, as transformers does.
  at::Tensor h = x.to(at::kFloat);
  h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight_ * h.to(x.scalar_type());
}

namespace {

// (x1, x2) -> (-x2, x1) over the two halves of the last dimension.
at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// [B, G, S, D] -> [B, G * groups, S, D], each key/value head serving `groups` query heads.
at::Tensor repeat_kv(const at::Tensor& x, int64_t groups) {
  if (groups == 1) return x;
  const int64_t b = x.size(0), g = x.size(1), s = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, g, groups, s, d}).reshape({b, g * groups, s, d});
}

std::shared_ptr<sdk::LinearModule> make_linear(int64_t in, int64_t out, bool bias, const c10::TensorOptions& options) {
  return std::make_shared<DenseLinear>(in, out, bias, options);
}

}  // namespace

Attention::Attention(const ModelConfig& c, int64_t layer_index, const c10::TensorOptions& options)
    : layer_index_(layer_index),
      num_heads_(c.num_heads),
      num_kv_heads_(c.num_kv_heads),
      head_dim_(c.head_dim),
      window_(c.layer_windows.empty() ? 0 : c.layer_windows.at(layer_index)) {
  q_proj = register_module("q_proj", make_linear(c.hidden_size, c.num_heads * c.head_dim, c.qkv_bias, options));
  k_proj = register_module("k_proj", make_linear(c.hidden_size, c.num_kv_heads * c.head_dim, c.qkv_bias, options));
  v_proj = register_module("v_proj", make_linear(c.hidden_size, c.num_kv_heads * c.head_dim, c.qkv_bias, options));
  o_proj = register_module("o_proj", make_linear(c.num_heads * c.head_dim, c.hidden_size, c.o_bias, options));
}

at::Tensor Attention::forward(const at::Tensor& x, const AttentionInputs& inputs, KVCache* cache) {
  const int64_t b = x.size(0), t = x.size(1);
  at::Tensor q = q_proj->forward(x).reshape({b, t, num_heads_, head_dim_}).transpose(1, 2);     // [B, H, T, D]
  at::Tensor k = k_proj->forward(x).reshape({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);  // [B, G, T, D]
  at::Tensor v = v_proj->forward(x).reshape({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);  // [B, G, T, D]

  // RoPE: x * cos + rotate_half(x) * sin, one angle per (position, frequency).
  const at::Tensor cos = inputs.cos.unsqueeze(1), sin = inputs.sin.unsqueeze(1);  // [B, 1, T, D]
  q = q * cos + rotate_half(q) * sin;
  k = k * cos + rotate_half(k) * sin;
  if (cache) std::tie(k, v) = cache->write(layer_index_, k, v);  // [B, G, S, D]

  const int64_t groups = num_heads_ / num_kv_heads_;
  k = repeat_kv(k, groups);
  v = repeat_kv(v, groups);
  const AttentionMask& m = inputs.mask_for(window_);
  at::Tensor out = at::scaled_dot_product_attention(q, k, v, m.mask.defined() ? std::optional<at::Tensor>(m.mask) : std::nullopt,
                                                    /*dropout_p=*/0.0, m.is_causal,
                                                    /*scale=*/std::pow(static_cast<double>(head_dim_), -0.5));
  return o_proj->forward(out.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}));
}

Mlp::Mlp(const ModelConfig& c, const c10::TensorOptions& options) {
  gate_proj = register_module("gate_proj", make_linear(c.hidden_size, c.intermediate_size, c.mlp_bias, options));
  up_proj = register_module("up_proj", make_linear(c.hidden_size, c.intermediate_size, c.mlp_bias, options));
  down_proj = register_module("down_proj", make_linear(c.intermediate_size, c.hidden_size, c.mlp_bias, options));
}

at::Tensor Mlp::forward(const at::Tensor& x) {
  return down_proj->forward(at::silu(gate_proj->forward(x)) * up_proj->forward(x));  // [B, T, F] -> [B, T, C]
}

DecoderLayer::DecoderLayer(const ModelConfig& c, int64_t layer_index, const c10::TensorOptions& options) {
  self_attn = register_module("self_attn", std::make_shared<Attention>(c, layer_index, options));
  if (!c.sparse_layers.empty() && c.sparse_layers.at(layer_index))
    moe = register_module("mlp", std::make_shared<SparseMoeBlock>(c, options));
  else
    mlp = register_module("mlp", std::make_shared<Mlp>(c, options));
  input_layernorm = register_module("input_layernorm", std::make_shared<RmsNorm>(c.hidden_size, c.rms_norm_eps, options));
  post_attention_layernorm =
      register_module("post_attention_layernorm", std::make_shared<RmsNorm>(c.hidden_size, c.rms_norm_eps, options));
}

at::Tensor DecoderLayer::forward(const at::Tensor& x, const AttentionInputs& inputs, KVCache* cache) {
  at::Tensor h = x + self_attn->forward(input_layernorm->forward(x), inputs, cache);
  const at::Tensor n = post_attention_layernorm->forward(h);
  return h + (moe ? moe->forward(n, inputs.router_logits) : mlp->forward(n));
}

DecoderStack::DecoderStack(const ModelConfig& c, const c10::TensorOptions& options) {
  embed_tokens = register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, options));
  auto holder = register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < c.num_layers; ++i)
    layers.push_back(holder->register_module(std::to_string(i), std::make_shared<DecoderLayer>(c, i, options)));
  norm = register_module("norm", std::make_shared<RmsNorm>(c.hidden_size, c.rms_norm_eps, options));
}

CausalLM::CausalLM(const ModelConfig& c, const c10::TensorOptions& options) {
  model = register_module("model", std::make_shared<DecoderStack>(c, options));
  lm_head = c.tie_word_embeddings
                ? register_module("lm_head", std::static_pointer_cast<sdk::LinearModule>(
                                                 std::make_shared<DenseLinear>(model->embed_tokens->weight())))
                : register_module("lm_head", make_linear(c.hidden_size, c.vocab_size, false, options));
}

}  // namespace ftcore::model

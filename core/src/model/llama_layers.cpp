// The decoder's modules (model_layers.h): the dense Linear slot, embedding,
// RMSNorm, grouped-query attention with RoPE through
// at::scaled_dot_product_attention (eager when soft-capped), the gated MLP and
// the residual layer, registered under transformers' names. Every family is
// this one decoder with ModelConfig's switches; the arithmetic follows each
// family's transformers modeling file op for op (RMSNorm's fp32 statistic,
// cos/sin cast to the activations' dtype) so fp32 logits agree to rounding.
//
// Shapes: B batch, T new tokens, S keys, C hidden, H query heads,
// G key/value heads, D head size, F MLP width.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include "ftcore/model_layers.h"
#include "fused_norm_rope.h"
#include "gated_activation.h"
#include "packed_gemm.h"
#include "recast_weight_linear.h"
#include "records_graph.h"
#include "reusable_in_place.h"
#include "short_row_attention.h"
#include "tied_embedding_gradient.h"
#include "widened_gemm.h"

namespace ftcore::model {

DenseLinear::DenseLinear(int64_t in_features, int64_t out_features, bool with_bias, const c10::TensorOptions& options) {
  weight_ = register_parameter("weight", at::empty({out_features, in_features}, options));
  if (with_bias) bias_ = register_parameter("bias", at::empty({out_features}, options));
}

DenseLinear::DenseLinear(const at::Tensor& weight) : shares_weight_(true) {
  weight_ = register_parameter("weight", weight);
}

at::Tensor DenseLinear::forward(const at::Tensor& x) {
  if (recasting_weight_applies(x, weight_, bias_, shares_weight_))
    return linear_recasting_weight(x, weight_, shares_weight_);
  if (!PackedFrozenWeight::applies(x, weight_, bias_)) {
    const at::Tensor& weight = weight_for_autocast();
    if (frozen_weight_linear_widens(x, weight, bias_)) return linear_on_frozen_weight(x, weight, bias_);
    return at::linear(x, weight, bias_);
  }
  if (!packed_) packed_ = std::make_shared<PackedFrozenWeight>();
  return packed_->linear(x, weight_, bias_);
}

const at::Tensor& DenseLinear::weight_for_autocast() {
  const c10::DeviceType device = weight_.device().type();
  if (weight_.requires_grad() || weight_.scalar_type() != at::kFloat || !at::autocast::is_autocast_enabled(device)) {
    autocast_weight_ = at::Tensor();  // not frozen (any more), or no autocast: hold no copy
    return weight_;
  }
  const at::ScalarType dtype = at::autocast::get_autocast_dtype(device);
  if (!autocast_weight_.defined() || autocast_weight_.scalar_type() != dtype || autocast_source_ != weight_.data_ptr() ||
      autocast_version_ != weight_._version()) {
    at::NoGradGuard no_grad;
    autocast_weight_ = weight_.to(dtype);
    autocast_source_ = weight_.data_ptr();
    autocast_version_ = weight_._version();
  }
  return autocast_weight_;
}

namespace {

[[noreturn]] void throw_compute_dtype_only(const char* what, const at::Tensor& weight) {
  throw std::logic_error(std::string(what) + ": this Linear slot keeps its frozen weight in " +
                         c10::toString(weight.scalar_type()) +
                         " only (the adapter declared it never reads the base after apply); its fp32 values are gone");
}

}  // namespace

at::Tensor DenseLinear::dense_weight() const {
  if (compute_dtype_only_) throw_compute_dtype_only("dense_weight", weight_);
  return weight_;
}

int64_t DenseLinear::keep_frozen_weight_in(at::ScalarType dtype) {
  if (shares_weight_ || weight_.requires_grad() || weight_.scalar_type() != at::kFloat || dtype == at::kFloat) return 0;
  const int64_t freed = weight_.numel() * weight_.element_size();
  at::NoGradGuard no_grad;
  // set_data keeps the registered parameter (its name and identity) and changes its storage.
  weight_.set_data(weight_.to(dtype));
  autocast_weight_ = at::Tensor();
  packed_.reset();
  compute_dtype_only_ = true;
  return freed;
}

void DenseLinear::set_dense_weight(const at::Tensor& weight) {
  if (compute_dtype_only_) throw_compute_dtype_only("set_dense_weight", weight_);
  TORCH_CHECK(weight.sizes() == weight_.sizes(), "set_dense_weight: ", weight.sizes(), " into a ", weight_.sizes(),
              " slot");
  at::NoGradGuard no_grad;
  weight_.copy_(weight);
}

Embedding::Embedding(int64_t vocab_size, int64_t hidden_size, const c10::TensorOptions& options) {
  weight_ = register_parameter("weight", at::empty({vocab_size, hidden_size}, options));
}

at::Tensor Embedding::forward(const at::Tensor& ids) const {
  // With a graph, the node that can sum into a tied lm_head's gradient (the same values and gradients).
  return records_graph({weight_}) ? embedding_summing_into_tied_head(weight_, ids) : at::embedding(weight_, ids);
}

RmsNorm::RmsNorm(int64_t size, double eps, RmsNormStyle style, const c10::TensorOptions& options)
    : eps_(eps), style_(style) {
  // (1 + w) norms start from w = 0, the others from w = 1: both the identity.
  weight_ = register_parameter("weight", style == RmsNormStyle::unit_offset ? at::zeros({size}, options)
                                                                            : at::ones({size}, options));
}

at::Tensor RmsNorm::forward(const at::Tensor& x) const {
  RECORD_USER_SCOPE("ftcore::rms_norm");  // FTCORE_PROFILE's ranges (op_profile.h)
  return rms_norm(x, weight_, eps_, style_);
}

namespace {

std::shared_ptr<sdk::LinearModule> make_linear(int64_t in, int64_t out, bool bias, const c10::TensorOptions& options) {
  return std::make_shared<DenseLinear>(in, out, bias, options);
}

bool is_sliding(const ModelConfig& c, int64_t layer) { return !c.layer_windows.empty() && c.layer_windows.at(layer) > 0; }

}  // namespace

Attention::Attention(const ModelConfig& c, int64_t layer_index, const c10::TensorOptions& options)
    : layer_index_(layer_index),
      num_heads_(c.num_heads),
      num_kv_heads_(c.num_kv_heads),
      head_dim_(c.head_dim),
      window_(c.layer_windows.empty() ? 0 : c.layer_windows.at(layer_index)),
      qk_norm_(c.qk_norm),
      uses_rope_(c.layer_uses_rope.empty() || c.layer_uses_rope.at(layer_index)),
      uses_sliding_rope_(c.sliding_rope.has_value() && is_sliding(c, layer_index)),
      scale_(c.attention_scale > 0 ? c.attention_scale : std::pow(static_cast<double>(c.head_dim), -0.5)),
      softcap_(c.attn_logit_softcap) {
  const int64_t q_size = c.num_heads * c.head_dim, kv_size = c.num_kv_heads * c.head_dim;
  if (c.fused_qkv) {
    // Phi3Attention registers o_proj first; the same order keeps slot and parameter lists PEFT's.
    o_proj = register_module("o_proj", make_linear(q_size, c.hidden_size, c.o_bias, options));
    qkv_proj = register_module("qkv_proj", make_linear(c.hidden_size, q_size + 2 * kv_size, c.qkv_bias, options));
  } else {
    q_proj = register_module("q_proj", make_linear(c.hidden_size, q_size, c.qkv_bias, options));
    k_proj = register_module("k_proj", make_linear(c.hidden_size, kv_size, c.qkv_bias, options));
    v_proj = register_module("v_proj", make_linear(c.hidden_size, kv_size, c.qkv_bias, options));
  }
  if (!o_proj) o_proj = register_module("o_proj", make_linear(q_size, c.hidden_size, c.o_bias, options));
  if (c.qk_norm != QkNorm::none) {
    const bool per_head = c.qk_norm == QkNorm::per_head;
    q_norm = register_module("q_norm", std::make_shared<RmsNorm>(per_head ? c.head_dim : q_size, c.rms_norm_eps,
                                                                 c.norm_style, options));
    k_norm = register_module("k_norm", std::make_shared<RmsNorm>(per_head ? c.head_dim : kv_size, c.rms_norm_eps,
                                                                 c.norm_style, options));
  }
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> Attention::project(const at::Tensor& x) {
  if (!qkv_proj) return {q_proj->forward(x), k_proj->forward(x), v_proj->forward(x)};
  const int64_t q_size = num_heads_ * head_dim_, kv_size = num_kv_heads_ * head_dim_;
  at::Tensor qkv = qkv_proj->forward(x);  // rows: queries, then keys, then values
  return {qkv.narrow(-1, 0, q_size), qkv.narrow(-1, q_size, kv_size), qkv.narrow(-1, q_size + kv_size, kv_size)};
}

namespace {

// Under bf16/fp16 autocast, SDPA runs libtorch's CPU flash attention in the
// autocast dtype, whose backward is slow on short rows: forward + backward of
// [8, 9, T, 64] causal, 2 threads (AVX-512 + AMX Xeon) took 7.0 / 13.7 / 20.1
// ms in bf16 flash against 2.1 / 6.7 / 26.7 ms in the fp32 math path (scores,
// softmax, matmul; autograd's backward) at T = 64 / 128 / 256
// (docs/benchmarks.md). So while recording a graph under autocast (or running
// a checkpointed layer, which backward recomputes with one), rows whose
// keys number at most 128 take the math path in fp32 with autocast off:
// faster, and per op nearer fp32 SDPA (5.8e-6 against bf16 flash's 0.086 on
// random inputs; end to end the bf16 loss lands 0.06% from fp32, see there). Its node keeps
// only q, k and v and recomputes the [B, H, T, S] weights in backward
// (short_row_attention.h). Outside autocast (fp32, or a bf16 model) SDPA is left as it is, so
// those forwards stay equal to transformers' and PEFT's bit for bit.
bool short_rows_train_faster_in_math(const at::Tensor& q, const at::Tensor& k) {
  constexpr int64_t kLongestKeys = 128;
  if (!q.device().is_cpu() || !at::autocast::is_autocast_enabled(c10::DeviceType::CPU)) return false;
  const at::ScalarType dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CPU);
  const bool reduced = dtype == at::kBFloat16 || dtype == at::kHalf;
  // Grad mode rather than q/k/v requiring grad: a layer below any trainable
  // tensor must choose as its checkpointed first forward (no grad) does.
  const bool recording = at::GradMode::is_enabled() || CheckpointPassScope::current() != CheckpointPass::none;
  return reduced && recording && k.size(2) <= kLongestKeys;
}

}  // namespace

at::Tensor Attention::attend(const at::Tensor& q, const at::Tensor& kv_k, const at::Tensor& kv_v,
                             const AttentionMask& m) const {
  const std::optional<at::Tensor> mask = m.mask.defined() ? std::optional<at::Tensor>(m.mask) : std::nullopt;
  const int64_t groups = num_heads_ / num_kv_heads_;
  if (softcap_ <= 0 && short_rows_train_faster_in_math(q, kv_k)) {
    // The math op adds its mask: a boolean one becomes 0 / -inf here, as the
    // public SDPA converts it (a fully masked row then gives 0, as there).
    std::optional<at::Tensor> additive = mask;
    if (mask && mask->scalar_type() == at::kBool) {
      if (!m.additive_fp32->defined()) {
        c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
        *m.additive_fp32 = at::zeros(mask->sizes(), q.options().dtype(at::kFloat))
                              .masked_fill(mask->logical_not(), -std::numeric_limits<float>::infinity());
      }
      additive = *m.additive_fp32;
    }
    return short_row_math_attention(q, kv_k, kv_v, additive, groups, m.is_causal, scale_);
  }
  if (softcap_ <= 0 && groups > 1 && q.device().is_cpu()) {
    // libtorch's CPU flash kernel reads each key/value head for its group of query heads
    // (enable_gqa): the same bits as on repeated heads, without copying k and v per layer
    // (checked: bf16, fp16 and fp32, 120 shapes of batch, length and head layout at 2, 8
    // and 32 threads, and causal, boolean and additive masks; docs/benchmarks.md). In a
    // recorded graph its node keeps the unrepeated k and v (the repeated copies were 14%
    // of an fp32 LoRA step's saved tensors on the default model), and its backward sums
    // each group's key and value gradients in its own order: the same q gradient, k and v
    // gradients within rounding of autograd's sum over repeated heads (1e-7 relative on
    // [8, 9, 59, 64]), and 1.3x faster there (2.2 -> 1.7 ms forward and backward).
    return at::scaled_dot_product_attention(q, kv_k, kv_v, mask, /*dropout_p=*/0.0, m.is_causal, scale_,
                                            /*enable_gqa=*/true);
  }
  const at::Tensor k = repeat_kv(kv_k, groups), v = repeat_kv(kv_v, groups);
  if (softcap_ <= 0) return at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0, m.is_causal, scale_);
  // Soft-capped scores (Gemma 2) have no fused kernel: scores, cap, mask,
  // softmax in fp32 (rounded back to the activations' dtype), as transformers' eager path.
  at::Tensor scores = at::matmul(q, k.transpose(2, 3)) * scale_;  // [B, H, T, S]
  scores = at::tanh(scores / softcap_) * softcap_;
  at::Tensor allowed = m.mask;
  if (!allowed.defined() && m.is_causal)
    allowed = at::ones({scores.size(2), scores.size(3)}, q.options().dtype(at::kBool)).tril(scores.size(3) - scores.size(2));
  if (allowed.defined()) scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  return at::matmul(at::softmax(scores, -1, at::kFloat).to(q.scalar_type()), v);
}

at::Tensor Attention::forward(const at::Tensor& x, const AttentionInputs& inputs, KVCache* cache) {
  RECORD_USER_SCOPE("ftcore::attention");
  const int64_t b = x.size(0), t = x.size(1);
  auto [q, k, v] = project(x);
  if (qk_norm_ == QkNorm::whole_projection) {  // OLMo 2: one norm over all heads' values
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = q.reshape({b, t, num_heads_, head_dim_});
  k = k.reshape({b, t, num_kv_heads_, head_dim_});
  if (qk_norm_ == QkNorm::per_head) {  // Qwen3, Gemma 3: each head on its own
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  q = q.transpose(1, 2);                                                      // [B, H, T, D]
  k = k.transpose(1, 2);                                                      // [B, G, T, D]
  v = v.reshape({b, t, num_kv_heads_, head_dim_}).transpose(1, 2);            // [B, G, T, D]

  if (uses_rope_) {  // x * cos + rotate_half(x) * sin, one angle per (position, frequency)
    RECORD_USER_SCOPE("ftcore::rope");
    const at::Tensor& cos = uses_sliding_rope_ ? inputs.sliding_cos : inputs.cos;
    const at::Tensor& sin = uses_sliding_rope_ ? inputs.sliding_sin : inputs.sin;
    q = rotary(std::move(q), cos.unsqueeze(1), sin.unsqueeze(1));
    k = rotary(std::move(k), cos.unsqueeze(1), sin.unsqueeze(1));
  }
  if (cache) std::tie(k, v) = cache->write(layer_index_, k, v);  // [B, G, S, D]

  at::Tensor out = attend(q, k, v, inputs.mask_for(window_));
  return o_proj->forward(out.transpose(1, 2).reshape({b, t, num_heads_ * head_dim_}));
}

Mlp::Mlp(const ModelConfig& c, const c10::TensorOptions& options) : gelu_(c.hidden_act == "gelu_pytorch_tanh") {
  if (c.fused_gate_up) {
    gate_up_proj = register_module("gate_up_proj", make_linear(c.hidden_size, 2 * c.intermediate_size, c.mlp_bias, options));
  } else {
    gate_proj = register_module("gate_proj", make_linear(c.hidden_size, c.intermediate_size, c.mlp_bias, options));
    up_proj = register_module("up_proj", make_linear(c.hidden_size, c.intermediate_size, c.mlp_bias, options));
  }
  down_proj = register_module("down_proj", make_linear(c.intermediate_size, c.hidden_size, c.mlp_bias, options));
}

at::Tensor Mlp::forward(const at::Tensor& x) {
  RECORD_USER_SCOPE("ftcore::mlp");
  at::Tensor gate, up;
  if (gate_up_proj) {
    at::Tensor both = gate_up_proj->forward(x);  // [B, T, 2F]: gate, then up
    const int64_t f = both.size(-1) / 2;
    gate = both.narrow(-1, 0, f);
    up = both.narrow(-1, f, f);
  } else {
    gate = gate_proj->forward(x);
    up = up_proj->forward(x);
  }
  return down_proj->forward(gated_activation(std::move(gate), up, gelu_));  // [B, T, F] -> [B, T, C]
}

DecoderLayer::DecoderLayer(const ModelConfig& c, int64_t layer_index, const c10::TensorOptions& options)
    : placement_(c.norm_placement), residual_multiplier_(c.residual_multiplier) {
  self_attn = register_module("self_attn", std::make_shared<Attention>(c, layer_index, options));
  if (!c.sparse_layers.empty() && c.sparse_layers.at(layer_index))
    moe = register_module("mlp", std::make_shared<SparseMoeBlock>(c, options));
  else
    mlp = register_module("mlp", std::make_shared<Mlp>(c, options));
  auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<RmsNorm>(c.hidden_size, c.rms_norm_eps, c.norm_style, options));
  };
  if (placement_ != NormPlacement::post) input_layernorm = norm("input_layernorm");
  post_attention_layernorm = norm("post_attention_layernorm");
  if (placement_ == NormPlacement::sandwich) pre_feedforward_layernorm = norm("pre_feedforward_layernorm");
  if (placement_ != NormPlacement::pre) post_feedforward_layernorm = norm("post_feedforward_layernorm");
}

at::Tensor DecoderLayer::forward(const at::Tensor& x, const AttentionInputs& inputs, KVCache* cache) {
  auto add = [&](const at::Tensor& residual, at::Tensor& block) {
    if (residual_multiplier_ != 1.0) return residual + block * residual_multiplier_;
    // block + residual rounds as residual + block does; in place when the block is a result only we hold.
    const bool same_shape_and_type = block.sizes() == residual.sizes() && block.scalar_type() == residual.scalar_type();
    if (same_shape_and_type && !records_graph({residual}) && reusable_in_place(block)) return block.add_(residual);
    return residual + block;
  };
  // Llama's post_attention_layernorm normalizes the MLP input; OLMo 2's and Gemma's the attention output.
  at::Tensor h = self_attn->forward(input_layernorm ? input_layernorm->forward(x) : x, inputs, cache);
  if (placement_ != NormPlacement::pre) h = post_attention_layernorm->forward(h);
  const at::Tensor mid = add(x, h);
  h = placement_ == NormPlacement::pre        ? post_attention_layernorm->forward(mid)
      : placement_ == NormPlacement::sandwich ? pre_feedforward_layernorm->forward(mid)
                                              : mid;
  h = moe ? moe->forward(h, inputs.router_logits) : mlp->forward(h);
  if (post_feedforward_layernorm) h = post_feedforward_layernorm->forward(h);
  return add(mid, h);
}

DecoderStack::DecoderStack(const ModelConfig& c, const c10::TensorOptions& options) {
  embed_tokens = register_module("embed_tokens", std::make_shared<Embedding>(c.vocab_size, c.hidden_size, options));
  auto holder = register_module("layers", std::make_shared<torch::nn::Module>());
  for (int64_t i = 0; i < c.num_layers; ++i)
    layers.push_back(holder->register_module(std::to_string(i), std::make_shared<DecoderLayer>(c, i, options)));
  norm = register_module("norm", std::make_shared<RmsNorm>(c.hidden_size, c.rms_norm_eps, c.norm_style, options));
}

CausalLM::CausalLM(const ModelConfig& c, const c10::TensorOptions& options) {
  model = register_module("model", std::make_shared<DecoderStack>(c, options));
  lm_head = c.tie_word_embeddings
                ? register_module("lm_head", std::static_pointer_cast<sdk::LinearModule>(
                                                 std::make_shared<DenseLinear>(model->embed_tokens->weight())))
                : register_module("lm_head", make_linear(c.hidden_size, c.vocab_size, false, options));
}

}  // namespace ftcore::model

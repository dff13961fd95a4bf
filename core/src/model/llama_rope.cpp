// Rotary position embedding tables (RotaryEmbedding in model_layers.h): the
// inverse frequencies of each rope type exactly as transformers'
// ROPE_INIT_FUNCTIONS compute them (same ops, same fp32 order), and the
// cos/sin of every position. RoFormer, Su et al., https://arxiv.org/abs/2104.09864
//
// RoPE turns each pair (x_i, x_{i+D/2}) of a head by the angle p * f_i:
//   default  f_i = 1 / theta^(2i/D),  i < D/2
//   linear   f_i / factor   (position interpolation, https://arxiv.org/abs/2306.15595)
//   dynamic  theta' = theta * (factor * L / M - (factor - 1))^(D / (D - 2)) once the
//            sequence length L passes max_position_embeddings M (dynamic NTK)
//   llama3   wavelengths beyond original_max / low_freq_factor are divided by
//            factor, those under original_max / high_freq_factor kept, a
//            linear blend between (Llama 3.1)
//   longrope f_i / short_i up to original_max positions, f_i / long_i beyond,
//            cos and sin times attention_factor (Phi-3 LongRoPE, https://arxiv.org/abs/2402.13753)
// With partial_rotary_factor < 1 only the first R = int(D * factor) dims turn.
// Shapes: B batch, T tokens, D head size.
#include <cmath>

#include <ATen/ATen.h>

#include "ftcore/model_layers.h"

namespace ftcore::model {

namespace {

// 1 / base^(2i/D) with `base` a number ...
at::Tensor inverse_frequencies_for(double base, int64_t dim) {
  at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  return at::reciprocal(at::pow(base, exponents));  // Python's 1.0 / t is t.reciprocal()
}

// ... or a 0-dim fp32 tensor (dynamic NTK computes its base in fp32, as transformers does).
at::Tensor inverse_frequencies_for(const at::Tensor& base, int64_t dim) {
  at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
  return at::reciprocal(at::pow(base, exponents));  // Python's 1.0 / t is t.reciprocal()
}

at::Tensor llama3_frequencies(const RopeConfig& rope, int64_t dim) {
  at::Tensor inv_freq = inverse_frequencies_for(rope.theta, dim);
  const double old_context = static_cast<double>(rope.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / rope.low_freq_factor;
  const double high_freq_wavelen = old_context / rope.high_freq_factor;
  at::Tensor wavelen = at::reciprocal(inv_freq) * (2 * M_PI);
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / rope.factor, inv_freq);
  at::Tensor smooth = (at::reciprocal(wavelen) * old_context - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor);
  at::Tensor smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled;
  at::Tensor is_medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(is_medium, smoothed, scaled);
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config, const RopeConfig& rope)
    : config_(config), rope_(rope), rotary_dim_(static_cast<int64_t>(config.head_dim * rope.partial_rotary_factor)) {
  const int64_t dim = rotary_dim_;
  if (dim <= 0 || dim % 2 != 0 || dim > config.head_dim)
    throw ModelError("partial_rotary_factor " + std::to_string(rope.partial_rotary_factor) + " gives " +
                     std::to_string(dim) + " rotary dims of head_dim " + std::to_string(config.head_dim) +
                     " (needs an even number in 2.." + std::to_string(config.head_dim) + ")");
  if (rope.type == "default") {
    base_inv_freq_ = inverse_frequencies_for(rope.theta, dim);
  } else if (rope.type == "linear") {
    base_inv_freq_ = inverse_frequencies_for(rope.theta, dim) / rope.factor;
  } else if (rope.type == "dynamic") {
    // At and below max_position_embeddings the formula's bracket is 1 (computed in double, as at init).
    const double m = static_cast<double>(config.max_position_embeddings);
    const double base = rope.theta * std::pow(rope.factor * m / m - (rope.factor - 1),
                                              static_cast<double>(dim) / static_cast<double>(dim - 2));
    base_inv_freq_ = inverse_frequencies_for(base, dim);
  } else if (rope.type == "llama3") {
    base_inv_freq_ = llama3_frequencies(rope, dim);
  } else if (rope.type == "longrope") {
    for (const auto* factors : {&rope.short_factor, &rope.long_factor})
      if (static_cast<int64_t>(factors->size()) != dim / 2)
        throw ModelError("longrope short_factor and long_factor need " + std::to_string(dim / 2) +
                         " values (rotary dims / 2), got " + std::to_string(factors->size()));
    // 1 / (factor_i * theta^(2i/R)), as transformers' _compute_longrope_parameters.
    auto scaled = [&](const std::vector<double>& factors) {
      at::Tensor f = at::tensor(factors, at::kDouble).to(at::kFloat);
      at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / static_cast<double>(dim);
      return at::reciprocal(f * at::pow(rope.theta, exponents));
    };
    base_inv_freq_ = scaled(rope.short_factor);
    long_inv_freq_ = scaled(rope.long_factor);
  } else {
    throw ModelError("rope type '" + rope.type +
                     "' is not supported (supported: default, linear, dynamic, llama3, longrope)");
  }
}

at::Tensor RotaryEmbedding::inverse_frequencies(int64_t seq_len) const {
  if (rope_.type == "longrope")
    return seq_len > rope_.original_max_position_embeddings ? long_inv_freq_ : base_inv_freq_;
  if (rope_.type != "dynamic" || seq_len <= config_.max_position_embeddings) return base_inv_freq_;
  const int64_t dim = rotary_dim_;
  at::Tensor base = at::scalar_tensor(seq_len, at::kLong) * rope_.factor / config_.max_position_embeddings;
  base = at::pow(base - (rope_.factor - 1), static_cast<double>(dim) / static_cast<double>(dim - 2)) * rope_.theta;
  return inverse_frequencies_for(base, dim);
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(const at::Tensor& positions, c10::ScalarType dtype) const {
  int64_t seq_len = 0;
  if (rope_.type == "dynamic" || rope_.type == "longrope")
    seq_len = positions.max().item<int64_t>() + 1;  // a sync, for these two types only
  at::Tensor inv_freq = inverse_frequencies(seq_len).to(positions.device());
  // angles [B, T, R/2]; each angle serves both halves of the rotated dims (rotate_half layout).
  at::Tensor angles = positions.unsqueeze(-1).to(at::kFloat) * inv_freq;
  at::Tensor emb = at::cat({angles, angles}, -1);
  if (rope_.attention_factor == 1.0) return {emb.cos().to(dtype), emb.sin().to(dtype)};
  return {(emb.cos() * rope_.attention_factor).to(dtype), (emb.sin() * rope_.attention_factor).to(dtype)};
}

}  // namespace ftcore::model

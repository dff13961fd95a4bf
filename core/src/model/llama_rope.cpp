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

RotaryEmbedding::RotaryEmbedding(const ModelConfig& config) : config_(config) {
  const RopeConfig& rope = config.rope;
  const int64_t dim = config.head_dim;
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
  } else {
    throw ModelError("rope type '" + rope.type + "' is not supported (supported: default, linear, dynamic, llama3)");
  }
}

at::Tensor RotaryEmbedding::inverse_frequencies(int64_t seq_len) const {
  const RopeConfig& rope = config_.rope;
  if (rope.type != "dynamic" || seq_len <= config_.max_position_embeddings) return base_inv_freq_;
  const int64_t dim = config_.head_dim;
  at::Tensor base = at::scalar_tensor(seq_len, at::kLong) * rope.factor / config_.max_position_embeddings;
  base = at::pow(base - (rope.factor - 1), static_cast<double>(dim) / static_cast<double>(dim - 2)) * rope.theta;
  return inverse_frequencies_for(base, dim);
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(const at::Tensor& positions, c10::ScalarType dtype) const {
  int64_t seq_len = 0;
  if (config_.rope.type == "dynamic") seq_len = positions.max().item<int64_t>() + 1;  // a sync, dynamic only
  at::Tensor inv_freq = inverse_frequencies(seq_len).to(positions.device());
  // angles [B, T, D/2]; each angle serves both halves of the head (rotate_half layout).
  at::Tensor angles = positions.unsqueeze(-1).to(at::kFloat) * inv_freq;
  at::Tensor emb = at::cat({angles, angles}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

}  // namespace ftcore::model

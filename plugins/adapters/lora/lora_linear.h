// The modules adapter/lora puts into a model's Linear slots.
//
// LoraLinear (Hu et al., LoRA, https://arxiv.org/abs/2106.09685) keeps the
// frozen base module and adds a trainable low-rank update, as PEFT's
// lora.Linear computes it:
//
//   y = base(x) + B (A dropout(x)) * scaling        x [..., in], y [..., out]
//   A [r, in], B [out, r], scaling = alpha / r  (rsLoRA: alpha / sqrt(r),
//   Kalajdzievski, https://arxiv.org/abs/2312.03732)
//
// A and B are fp32 whatever the base dtype (PEFT's autocast_adapter_dtype):
// x is cast to fp32 for the LoRA branch, the sum is taken in fp32 and cast
// back to the base output's dtype. Submodules are named as PEFT names them
// (without its adapter name), so named parameters read
// "<path>.base_layer.weight", "<path>.lora_A.weight", "<path>.lora_B.weight".
//
// DoRA (Liu et al., https://arxiv.org/abs/2402.09353) adds a trainable
// magnitude m [out] ("<path>.lora_magnitude_vector.weight") and rescales each
// output row of the adapted weight W + s B A to length m, as PEFT 0.21's
// DoraLinearLayer computes it (x' = dropout(x) in training with dropout > 0,
// else x):
//
//   n      = || W + s B A ||  per output row, DETACHED (paper, section 4.3:
//            treated as a constant, it gets no gradient)
//   y      = base(x) + (m / n - 1) * (x' W^T) + (m / n) * (B (A x')) * s
//   x' W^T = base(x) - b when x' = x (no dropout), else computed on x'
//
// m starts as ||W|| per row (with B = 0: the identity at init).
//
// PlainLinear is a dense y = x W^T + b with parameters "weight" and "bias":
// what merge() leaves in a slot (HF names again) and what a slot listed in
// modules_to_save becomes (a trainable copy, as PEFT's ModulesToSaveWrapper).
#pragma once

#include <cstdint>
#include <memory>

#include "ftcore/sdk/model_view.h"

namespace ftcore::plugins::lora {

// One LoRA factor, a module with a single parameter "weight".
class LoraFactor : public torch::nn::Module {
 public:
  explicit LoraFactor(const at::Tensor& weight) { weight_ = register_parameter("weight", weight); }
  const at::Tensor& weight() const { return weight_; }

 private:
  at::Tensor weight_;
};

class LoraLinear : public sdk::LinearModule {
 public:
  // A and B are created fp32 on the base weight's device with B = 0; the
  // caller initialises A (see init_lora_factors in lora_adapter.cpp). A
  // defined `magnitude` [out] makes this a DoRA layer.
  LoraLinear(std::shared_ptr<sdk::LinearModule> base, const at::Tensor& lora_a, const at::Tensor& lora_b,
             double scaling, double dropout, const at::Tensor& magnitude = {});

  at::Tensor forward(const at::Tensor& x) override;
  int64_t in_features() const override { return base_->in_features(); }
  int64_t out_features() const override { return base_->out_features(); }
  // W + scaling * B A (DoRA: rows rescaled to m) in the base weight's dtype
  // (what merge() writes).
  at::Tensor dense_weight() const override;
  at::Tensor bias() const override { return base_->bias(); }

  const std::shared_ptr<sdk::LinearModule>& base() const { return base_; }
  const at::Tensor& lora_a() const { return a_->weight(); }
  const at::Tensor& lora_b() const { return b_->weight(); }
  double scaling() const { return scaling_; }
  bool use_dora() const { return magnitude_ != nullptr; }
  const at::Tensor& magnitude() const { return magnitude_->weight(); }  // DoRA only

 private:
  at::Tensor dora_update(const at::Tensor& x, const at::Tensor& result);

  std::shared_ptr<sdk::LinearModule> base_;
  std::shared_ptr<LoraFactor> a_, b_;
  std::shared_ptr<LoraFactor> magnitude_;  // DoRA's m, else null
  double scaling_;
  double dropout_;
};

// W + scaling * B A, computed in fp32 and rounded once to W's dtype, as
// PEFT's merge does (`weight.data += get_delta_weight()`).
at::Tensor merged_weight(const at::Tensor& weight, const at::Tensor& lora_a, const at::Tensor& lora_b,
                         double scaling);

// DoRA's initial magnitude: ||W|| per output row [out], fp32. The norm is
// taken in W's own dtype (PEFT computes it before casting adapters to fp32,
// so a bf16 base gives a bf16-rounded m).
at::Tensor dora_initial_magnitude(const at::Tensor& weight);

// DoRA's merge (PEFT's DoraLinearVariant.merge): V = W + scaling * B A in
// fp32, each row scaled by m / ||V_row||, rounded once to W's dtype.
at::Tensor dora_merged_weight(const at::Tensor& weight, const at::Tensor& lora_a, const at::Tensor& lora_b,
                              const at::Tensor& magnitude, double scaling);

class PlainLinear : public sdk::LinearModule {
 public:
  // Registers the given tensors as they are (bias may be undefined).
  PlainLinear(const at::Tensor& weight, const at::Tensor& bias);

  at::Tensor forward(const at::Tensor& x) override;
  int64_t in_features() const override { return weight_.size(1); }
  int64_t out_features() const override { return weight_.size(0); }
  at::Tensor dense_weight() const override { return weight_; }
  at::Tensor bias() const override { return bias_; }

 private:
  at::Tensor weight_, bias_;
};

}  // namespace ftcore::plugins::lora

// Precision resolution, autocast scopes and dynamic loss scaling.
#include "precision.h"

#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "../util/all_finite.h"
#include "../util/cpu_features.h"

namespace ftcore::train {

namespace {

// AMX tiles make bf16 matmuls several times faster than fp32; AVX512-BF16's
// dot products alone do not pay for autocast's casts (measured: LoRA on the
// default model ran 189 tokens/s in bf16 vs 198 in fp32 on an AVX512-BF16
// CPU without AMX, docs/benchmarks.md), so "auto" wants AMX.
bool cpu_has_native_bf16() { return util::cpu_has_amx_bf16(); }

}  // namespace

Precision resolve_precision(const std::string& requested, c10::Device device) {
  std::string name = requested;
  if (name == "auto") {
    if (device.is_cuda()) {
      // Every GPU CUDA 13 supports (sm75+) runs bf16 autocast; sm80+ natively.
      name = "bf16";
    } else {
      name = cpu_has_native_bf16() ? "bf16" : "fp32";
    }
  }
  Precision p;
  p.name = name;
  if (device.is_cuda()) {
    // fp32 matmuls in TF32 on tensor cores, as the "auto" asks (HF's tf32 = true).
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
  }
  if (name == "fp32") return p;
  if (name != "bf16" && name != "fp16")
    throw std::invalid_argument("train.precision: expected auto, bf16, fp16 or fp32, got '" + requested + "'");
  p.autocast = true;
  p.dtype = name == "bf16" ? at::kBFloat16 : at::kHalf;
  return p;
}

AutocastScope::AutocastScope(const Precision& precision, c10::Device device) : device_type_(device.type()) {
  if (!precision.autocast) return;
  active_ = true;
  previous_enabled_ = at::autocast::is_autocast_enabled(device_type_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_type_);
  at::autocast::set_autocast_enabled(device_type_, true);
  at::autocast::set_autocast_dtype(device_type_, precision.dtype);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The cast cache holds low-precision copies of the weights; drop them when
  // the outermost scope ends, as torch.autocast's __exit__ does.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_type_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_type_, previous_dtype_);
}

bool DynamicLossScaler::unscale(const std::vector<at::Tensor>& params) const {
  if (!enabled_) return true;
  bool finite = true;
  const double inverse = 1.0 / scale_;
  for (const at::Tensor& p : params) {
    at::Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inverse);
    if (finite && !all_finite(g).item<bool>()) finite = false;
  }
  return finite;
}

void DynamicLossScaler::update(bool found_inf) {
  if (!enabled_) return;
  if (found_inf) {
    scale_ *= 0.5;
    clean_steps_ = 0;
  } else if (++clean_steps_ >= growth_interval_) {
    scale_ *= 2.0;
    clean_steps_ = 0;
  }
}

}  // namespace ftcore::train

// Compute precision of a training run, as HF Trainer's bf16/fp16 flags do it:
// weights keep their stored dtype (except frozen Linear weights of an adapter
// run, kept in the autocast dtype: run_setup.h) and ops run under autocast in bf16 or fp16
// (matmuls in the low precision, reductions and the loss in fp32). fp16 adds
// dynamic loss scaling, because fp16 gradients underflow without it.
// "auto" picks bf16 on CUDA and on a CPU with AMX-BF16, fp32 on other CPUs
// (where bf16 autocast was measured slower); on CUDA fp32 matmuls also run in TF32.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace ftcore::train {

struct Precision {
  std::string name = "fp32";  // fp32 | bf16 | fp16 (resolved, never auto)
  bool autocast = false;
  at::ScalarType dtype = at::kFloat;
};

// Throws std::invalid_argument when the device cannot compute the requested precision.
Precision resolve_precision(const std::string& requested, c10::Device device);

// Autocast on `device`'s type for the scope's lifetime (a no-op for fp32).
class AutocastScope {
 public:
  AutocastScope(const Precision& precision, c10::Device device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// torch.amp.GradScaler's dynamic scaling: losses are multiplied by `scale`
// before backward; before the optimizer step gradients are divided by it and
// checked; a step with an inf/NaN gradient is skipped and the scale halved,
// and after `growth_interval` clean steps the scale doubles.
class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(bool enabled, double initial_scale = 65536.0, int64_t growth_interval = 2000)
      : enabled_(enabled), scale_(enabled ? initial_scale : 1.0), growth_interval_(growth_interval) {}
  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  // Divides the gradients by the scale; false when any is not finite.
  bool unscale(const std::vector<at::Tensor>& params) const;
  // After a step (found_inf: the step was skipped).
  void update(bool found_inf);
  // Checkpoint fields.
  int64_t clean_steps() const { return clean_steps_; }
  void restore(double scale, int64_t clean_steps) { scale_ = scale, clean_steps_ = clean_steps; }

 private:
  bool enabled_;
  double scale_;
  int64_t growth_interval_;
  int64_t clean_steps_ = 0;
};

}  // namespace ftcore::train

// adapter/relora: ReLoRA (Lialin et al., "ReLoRA: High-Rank Training Through
// Low-Rank Updates", https://arxiv.org/abs/2307.05695) on top of adapter/lora,
// with Axolotl's options (relora_steps, relora_warmup_steps,
// relora_anneal_steps, relora_prune_ratio, relora_cpu_offload) and every
// adapter/lora option.
//
// A restart, after every relora_steps optimizer steps (S = steps completed,
// S % relora_steps == 0, never after the last step: the final adapter would
// be empty), for every adapted slot:
//
//   W <- W + scaling * B A        merged in fp32, rounded once to W's dtype
//                                 (relora_cpu_offload: computed on the CPU, copied back)
//   A <- Kaiming-uniform(a = sqrt(5)) (or normal(0, 1/r) with init = "gaussian"),  B <- 0
//
// so the model's function is unchanged (B = 0), and the optimizer state of
// every A and B is magnitude-pruned (Axolotl's magnitude_pruning_): for each
// floating state tensor x of n > 1 values (AdamW: exp_avg, exp_avg_sq,
// max_exp_avg_sq; never the step count)
//
//   t = quantile(|x|, relora_prune_ratio)   linear interpolation, as torch.quantile
//   x <- x * (|x| > t)                       zeroes floor(ratio * (n - 1)) + 1 values
//                                            when the magnitudes are distinct
//
// through Optimizer::state_by_name / load_state_by_name (state keyed by name).
// relora_prune_ratio = 0 keeps the state whole (Axolotl's quantile rule would
// still zero the single smallest value).
//
// The learning-rate multiplier (the trainer multiplies the scheduled lr by it;
// `step` is the 0-based index of the step about to run, as in transformers'
// LambdaLR), Axolotl's JaggedLRRestartScheduler (its ReLoRAScheduler before
// the rename) with N = relora_steps, W = relora_warmup_steps,
// A = relora_anneal_steps, p = step mod N:
//
//   step < N - A:   m = 1                              (the first cycle runs as scheduled)
//   otherwise:      t = min(1, p / W)                  if p < W        (re-warmup after a restart)
//                   t = min(1, (N - p) / A)            else if p > N - A   (anneal before a restart)
//                   t = 1                              otherwise
//                   m = 0.001 + (1 - 0.001) * t        (min_lr_scale = 0.001)
//
// A = 1 (the default) anneals nothing, since p <= N - 1; W = 0 warms nothing.
//
// Saved adapter (PEFT format, loads in PeftModel and `ftcore merge`): the
// cycles already merged are not lost. After K restarts each slot is saved as
// one LoRA of rank (K + 1) r whose factors stack every cycle's:
//
//   A' = [A_1; ...; A_K; A],  B' = [B_1 ... B_K B],  B' A' = sum_k B_k A_k + B A
//
// with lora_alpha chosen so scaling is unchanged (alpha' = scaling * r', or
// scaling * sqrt(r') with use_rslora). load() of such a file (resume,
// lora_model_dir) merges the first K cycles into the base one by one, in the
// order a run merged them (bit for bit the same base weights), and trains
// the last one; cycles it has merged already (a resume after lora_model_dir)
// must match and are not merged twice.
//
// Dense bases only: quantized bases (dequantize, merge, re-quantize, log the
// error) come with the quantizers (issue 6); apply() refuses a quantized slot,
// a slot whose weight is shared (tied lm_head) and use_dora.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lora_adapter.h"

namespace ftcore::plugins::lora {

struct ReloraOptions {
  int64_t relora_steps = 0;  // required, >= 1
  int64_t warmup_steps = 10;
  int64_t anneal_steps = 1;
  double prune_ratio = 0.9;
  bool cpu_offload = false;
};

inline constexpr double kReloraMinLrScale = 0.001;

// adapter/lora's ParamSpec plus the relora_* keys.
sdk::ParamSpec relora_param_spec();
ReloraOptions relora_options_from(const sdk::Options& options);

// The formula above.
double relora_lr_multiplier(int64_t step, const ReloraOptions& options);

// Zeroes the values of `tensor` whose magnitude is at most the `ratio`
// quantile of its magnitudes (in place); returns how many values are zero
// afterwards. ratio = 0 or fewer than two values: nothing is pruned.
int64_t magnitude_prune_(at::Tensor& tensor, double ratio);

class ReloraAdapter : public LoraAdapter {
 public:
  // Throws sdk::OptionError for a bad relora_* value, std::invalid_argument for a bad lora_model_dir.
  ReloraAdapter(LoraOptions lora, ReloraOptions relora);

  std::vector<sdk::ParamGroupSpec> apply(sdk::ModelView& model) override;
  sdk::TensorMap save() const override;
  std::string peft_config_json() const override;
  void load(const sdk::TensorMap& weights) override;
  void merge(sdk::ModelView& model) override;
  std::string initial_weights_dir() const override { return initial_dir_; }
  void on_event(const sdk::TrainerEvent& event, sdk::ModelView& model) override;
  double lr_multiplier(int64_t step) const override { return relora_lr_multiplier(step, relora_); }
  bool uses_base_weights_after_apply() const override { return true; }  // each restart merges into W

  // Cycles merged into the base so far (restarts here plus those loaded).
  int64_t merged_cycles() const { return merged_cycles_; }

 private:
  struct Slot {
    std::string path;
    std::shared_ptr<LoraLinear> module;
    at::Tensor weight;                            // the base's own dense weight, merged into in place; undefined for a quantized base (re-quantized instead)
    std::vector<at::Tensor> past_a, past_b;       // merged cycles, CPU fp32
  };
  void restart(int64_t step, sdk::Optimizer* optimizer);
  void merge_cycle(Slot& slot, const at::Tensor& a, const at::Tensor& b);
  void reinitialise(Slot& slot);
  struct PruneCount {  // values zeroed / values, over `tensors` state tensors
    int64_t zeroed = 0, total = 0, tensors = 0;
  };
  PruneCount prune_optimizer_state(sdk::Optimizer& optimizer) const;

  LoraOptions lora_;
  ReloraOptions relora_;
  std::string initial_dir_;
  std::vector<Slot> slots_;
  int64_t merged_cycles_ = 0;
  bool folded_ = false;  // merge() was called
};

}  // namespace ftcore::plugins::lora

// The trainer's settings, read once from the recipe's [train] section (the
// keys are declared in core/src/recipe/core_sections.cpp) into plain fields,
// with the defaults that depend on other keys resolved.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/params.h"

namespace ftcore::train {

struct TrainOptions {
  std::filesystem::path run_dir;  // output_dir / run_name
  std::string run_name;
  int64_t micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  int64_t eval_batch_size = 1;
  double num_epochs = 1.0;
  std::optional<int64_t> max_steps;
  double max_grad_norm = 1.0;
  std::string precision = "auto";  // auto | bf16 | fp16 | fp32
  bool gradient_checkpointing = false;
  uint64_t seed = 42;
  int64_t logging_steps = 10;
  std::optional<int64_t> eval_steps, evals_per_epoch, save_steps, saves_per_epoch, save_total_limit;
  std::optional<std::string> metric_for_best;
  std::optional<std::string> resume_from_checkpoint;
  std::optional<int64_t> early_stopping_patience;
  double neftune_noise_alpha = 0.0;
  std::optional<double> loss_watchdog_threshold;
  int64_t loss_watchdog_patience = 3;
  sdk::StateConversion state_conversion = sdk::StateConversion::Convert;
  bool eval_before_training = false;
  int64_t eval_generation_samples = 0;
  int64_t eval_max_new_tokens = 32;
  int64_t eval_generation_batch_size = 16;
  bool auto_micro_batch = false;

  // `recipe_path` names the run when run_name is unset (its file stem).
  static TrainOptions from_options(const sdk::Options& train, const std::filesystem::path& recipe_path);
};

// Whether a larger value of `metric` is better (accuracy, exact_match) or a
// smaller one (loss, perplexity).
bool metric_higher_is_better(const std::string& metric);

}  // namespace ftcore::train

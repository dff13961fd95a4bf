// [train] options -> TrainOptions.
#include "train_options.h"

namespace ftcore::train {

namespace {

template <typename T, typename Get>
std::optional<T> optional_value(const sdk::Options& o, const std::string& key, Get get) {
  if (!o.has_value(key)) return std::nullopt;
  return get(key);
}

}  // namespace

TrainOptions TrainOptions::from_options(const sdk::Options& o, const std::filesystem::path& recipe_path) {
  TrainOptions t;
  auto get_int = [&](const std::string& k) { return o.get_int(k); };
  auto get_string = [&](const std::string& k) { return o.get_string(k); };
  t.run_name = o.has_value("run_name") ? o.get_string("run_name") : recipe_path.stem().string();
  t.run_dir = std::filesystem::path(o.get_string("output_dir")) / t.run_name;
  t.micro_batch_size = o.get_int("micro_batch_size");
  t.gradient_accumulation_steps = o.get_int("gradient_accumulation_steps");
  t.eval_batch_size = o.has_value("eval_batch_size") ? o.get_int("eval_batch_size") : t.micro_batch_size;
  t.num_epochs = o.get_float("num_epochs");
  t.max_steps = optional_value<int64_t>(o, "max_steps", get_int);
  t.max_grad_norm = o.get_float("max_grad_norm");
  t.precision = o.get_string("precision");
  t.gradient_checkpointing = o.get_bool("gradient_checkpointing");
  t.seed = static_cast<uint64_t>(o.get_int("seed"));
  t.logging_steps = o.get_int("logging_steps");
  t.eval_steps = optional_value<int64_t>(o, "eval_steps", get_int);
  t.evals_per_epoch = optional_value<int64_t>(o, "evals_per_epoch", get_int);
  t.save_steps = optional_value<int64_t>(o, "save_steps", get_int);
  t.saves_per_epoch = optional_value<int64_t>(o, "saves_per_epoch", get_int);
  t.save_total_limit = optional_value<int64_t>(o, "save_total_limit", get_int);
  t.metric_for_best = optional_value<std::string>(o, "metric_for_best", get_string);
  t.resume_from_checkpoint = optional_value<std::string>(o, "resume_from_checkpoint", get_string);
  t.early_stopping_patience = optional_value<int64_t>(o, "early_stopping_patience", get_int);
  t.neftune_noise_alpha = o.has_value("neftune_noise_alpha") ? o.get_float("neftune_noise_alpha") : 0.0;
  if (o.has_value("loss_watchdog_threshold")) t.loss_watchdog_threshold = o.get_float("loss_watchdog_threshold");
  t.loss_watchdog_patience = o.get_int("loss_watchdog_patience");
  t.state_conversion =
      o.get_string("state_conversion") == "reset" ? sdk::StateConversion::Reset : sdk::StateConversion::Convert;
  t.eval_before_training = o.get_bool("eval_before_training");
  t.eval_generation_samples = o.get_int("eval_generation_samples");
  t.eval_max_new_tokens = o.get_int("eval_max_new_tokens");
  t.eval_generation_batch_size = o.get_int("eval_generation_batch_size");
  t.auto_micro_batch = o.get_bool("auto_micro_batch");
  return t;
}

bool metric_higher_is_better(const std::string& metric) {
  return metric.find("accuracy") != std::string::npos || metric.find("exact_match") != std::string::npos;
}

}  // namespace ftcore::train

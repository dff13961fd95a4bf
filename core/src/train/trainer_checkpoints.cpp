// The Trainer's side of checkpoints and outputs: what goes into a
// checkpoint (adapter or model, optimizer state, trainer state with the RNG),
// resuming from one, and the run's final adapter or model.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include "ftcore/safetensors.h"
#include "trainer.h"

namespace fs = std::filesystem;

namespace ftcore::train {

namespace {

at::Tensor cpu_rng_state() {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_cpu_rng_state(const at::Tensor& state) {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

}  // namespace

// The adapter's PEFT config with base_model_name_or_path filled in (the
// adapter cannot know the model's folder), so AutoPeftModelForCausalLM finds the base.
std::string Trainer::adapter_config_text() const {
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(s_.trainable.adapter->peft_config_json());
  config["base_model_name_or_path"] = s_.base.dir;
  return config.dump(2) + "\n";
}

// The adapter's tensors (PEFT names), or every weight of a full fine-tune (HF names).
sdk::TensorMap Trainer::weights_to_save() const {
  if (s_.trainable.adapter) return s_.trainable.adapter->save();
  sdk::TensorMap weights;
  for (const auto& p : s_.base.model->named_parameters()) weights.add(p.name, p.tensor.detach());
  weights.metadata["format"] = "pt";
  return weights;
}

// Every rank calls it (a sharded optimizer's state is gathered from all);
// rank 0 alone writes.
fs::path Trainer::save_checkpoint() {
  CheckpointContents c;
  c.optimizer_state = s_.components.optimizer->state_by_name();
  if (s_.distributed.sharding) c.optimizer_state = s_.distributed.sharding->gather_state(c.optimizer_state);
  const fs::path dir = s_.options.run_dir / checkpoint_name(state_.global_step);
  if (!s_.distributed.writes_outputs()) {
    last_saved_step_ = state_.global_step;
    return dir;
  }
  c.weights = weights_to_save();
  c.weights_file = s_.trainable.adapter ? "adapter_model.safetensors" : "model.safetensors";
  if (s_.trainable.adapter)
    c.text_files.emplace_back("adapter_config.json", adapter_config_text());
  else
    c.text_files.emplace_back("config.json", s_.base.config_json);
  state_.cpu_rng_state = cpu_rng_state();
  state_.loss_scale = scaler_.scale();
  state_.loss_scale_clean_steps = scaler_.clean_steps();
  const StepSlice next = plan_.slice(state_.global_step);
  state_.cursor_epoch = next.epoch;
  state_.cursor_batch = next.first_batch;
  // Only the best checkpoint is kept as "best"; the folder name is known before writing.
  c.state = state_;
  write_checkpoint(s_.options.run_dir, c);
  if (s_.options.save_total_limit)
    rotate_checkpoints(s_.options.run_dir, *s_.options.save_total_limit,
                       s_.options.metric_for_best ? state_.best_checkpoint : std::string());
  for (auto& logger : s_.components.loggers) logger->flush();
  last_saved_step_ = state_.global_step;
  spdlog::info("saved {}", dir.string());
  return dir;
}

void Trainer::remember_step_start_rng() { step_start_rng_ = cpu_rng_state(); }

void Trainer::restore_step_start_rng() {
  if (step_start_rng_.defined()) set_cpu_rng_state(step_start_rng_);
}

void Trainer::write_final_outputs() {
  if (!s_.distributed.writes_outputs()) return;
  const fs::path& dir = s_.options.run_dir;
  const bool adapter = s_.trainable.adapter != nullptr;
  safetensors::write_file(dir / (adapter ? "adapter_model.safetensors" : "model.safetensors"), weights_to_save());
  if (adapter)
    write_file_atomically(dir / "adapter_config.json", adapter_config_text());
  else
    write_file_atomically(dir / "config.json", s_.base.config_json);
}

void Trainer::resume_from(const fs::path& dir) {
  LoadedCheckpoint c = read_checkpoint(dir, s_.trainable.adapter ? "adapter_model.safetensors" : "model.safetensors");
  // Past the plan there is no step to take and no data cursor to find.
  if (c.state.global_step > state_.total_steps)
    throw std::runtime_error((dir / "trainer_state.json").string() + ": field 'global_step' is " +
                             std::to_string(c.state.global_step) + ", past the " + std::to_string(state_.total_steps) +
                             " steps this recipe plans; raise train.max_steps or num_epochs to train further");
  if (c.state.total_steps != state_.total_steps)
    spdlog::warn("resuming {}: it planned {} steps, this recipe plans {}", dir.string(), c.state.total_steps,
                 state_.total_steps);
  if (!c.state.recipe_sha256.empty() && c.state.recipe_sha256 != state_.recipe_sha256)
    spdlog::warn("resuming {}: the recipe's settings differ from the checkpoint's run", dir.string());
  if (s_.trainable.adapter) {
    s_.trainable.adapter->load(c.weights);
  } else {
    s_.base.model->load_weights(c.weights.tensors, (dir / "model.safetensors").string());
  }
  // Keyed by name: a sharded optimizer takes the entries of its own tensors.
  s_.components.optimizer->load_state_by_name(c.optimizer_state, s_.options.state_conversion);
  const int64_t total = state_.total_steps;
  state_ = std::move(c.state);
  state_.total_steps = total;
  state_.recipe_sha256 = s_.recipe_sha256;
  const StepSlice next = plan_.slice(state_.global_step);
  if (next.epoch != state_.cursor_epoch || next.first_batch != state_.cursor_batch)
    spdlog::warn("resuming {}: its cursor (epoch {}, batch {}) differs from this data's (epoch {}, batch {}); "
                 "the data or sampler changed",
                 dir.string(), state_.cursor_epoch, state_.cursor_batch, next.epoch, next.first_batch);
  set_cpu_rng_state(state_.cpu_rng_state);
  scaler_.restore(state_.loss_scale, state_.loss_scale_clean_steps);
  if (!scaler_.enabled()) scaler_.restore(1.0, 0);
  last_saved_step_ = state_.global_step;
  spdlog::info("resumed from {} at step {} of {}", dir.string(), state_.global_step, state_.total_steps);
}

}  // namespace ftcore::train

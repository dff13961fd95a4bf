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
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(s_.adapter->peft_config_json());
  config["base_model_name_or_path"] = s_.model_dir;
  return config.dump(2) + "\n";
}

fs::path Trainer::save_checkpoint() {
  CheckpointContents c;
  if (s_.adapter) {
    c.weights_file = "adapter_model.safetensors";
    c.weights = s_.adapter->save();
    c.text_files.emplace_back("adapter_config.json", adapter_config_text());
  } else {
    c.weights_file = "model.safetensors";
    for (const auto& p : s_.model->named_parameters()) c.weights.add(p.name, p.tensor.detach());
    c.weights.metadata["format"] = "pt";
    c.text_files.emplace_back("config.json", s_.model_config_json);
  }
  c.optimizer_state = s_.optimizer->state_by_name();
  state_.cpu_rng_state = cpu_rng_state();
  state_.loss_scale = scaler_.scale();
  state_.loss_scale_clean_steps = scaler_.clean_steps();
  const StepSlice next = plan_.slice(state_.global_step);
  state_.cursor_epoch = next.epoch;
  state_.cursor_batch = next.first_batch;
  // Only the best checkpoint is kept as "best"; the folder name is known before writing.
  c.state = state_;
  const fs::path dir = write_checkpoint(s_.options.run_dir, c);
  if (s_.options.save_total_limit)
    rotate_checkpoints(s_.options.run_dir, *s_.options.save_total_limit,
                       s_.options.metric_for_best ? state_.best_checkpoint : std::string());
  for (auto& logger : s_.loggers) logger->flush();
  spdlog::info("saved {}", dir.string());
  return dir;
}

void Trainer::write_final_outputs() {
  const fs::path& dir = s_.options.run_dir;
  if (s_.adapter) {
    safetensors::write_file(dir / "adapter_model.safetensors", s_.adapter->save());
    write_file_atomically(dir / "adapter_config.json", adapter_config_text());
  } else {
    sdk::TensorMap weights;
    for (const auto& p : s_.model->named_parameters()) weights.add(p.name, p.tensor.detach());
    weights.metadata["format"] = "pt";
    safetensors::write_file(dir / "model.safetensors", weights);
    write_file_atomically(dir / "config.json", s_.model_config_json);
  }
}

void Trainer::resume_from(const fs::path& dir) {
  LoadedCheckpoint c = read_checkpoint(dir, s_.adapter ? "adapter_model.safetensors" : "model.safetensors");
  if (c.state.total_steps != state_.total_steps)
    spdlog::warn("resuming {}: it planned {} steps, this recipe plans {}", dir.string(), c.state.total_steps,
                 state_.total_steps);
  if (!c.state.recipe_sha256.empty() && c.state.recipe_sha256 != state_.recipe_sha256)
    spdlog::warn("resuming {}: the recipe's settings differ from the checkpoint's run", dir.string());
  if (s_.adapter) {
    s_.adapter->load(c.weights);
  } else {
    s_.model->load_weights(c.weights.tensors, (dir / "model.safetensors").string());
  }
  s_.optimizer->load_state_by_name(c.optimizer_state, s_.options.state_conversion);
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
  spdlog::info("resumed from {} at step {} of {}", dir.string(), state_.global_step, state_.total_steps);
}

}  // namespace ftcore::train

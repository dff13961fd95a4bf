// The training loop, top to bottom: resume or start, then per step
// train_step() (trainer_step.cpp), the adapter's event, logs, evaluation,
// checkpoint, and the one question stop_reason() answers; the final adapter
// or model at the end (trainer_checkpoints.cpp).
#include "trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <spdlog/spdlog.h>

#include "ftcore/op_profile.h"
#include "ftcore/runtime.h"


namespace fs = std::filesystem;

namespace ftcore::train {

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double peak_rss_mib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

namespace {

std::string metric_key(const std::string& metric) {
  return metric.rfind("eval_", 0) == 0 ? metric.substr(5) : metric;
}

double state_bytes(const sdk::TensorMap& state) {
  double bytes = 0.0;
  for (const auto& [name, t] : state.tensors) bytes += static_cast<double>(t.numel() * t.element_size());
  return bytes;
}

}  // namespace

Trainer::Trainer(TrainingSetup& setup)
    : s_(setup),
      plan_(setup.components.sampler, setup.components.sampler_input, setup.options.gradient_accumulation_steps,
            setup.options.num_epochs, setup.options.max_steps),
      scaler_(setup.precision.name == "fp16") {
  state_.total_steps = plan_.total_steps();
  state_.scheduler = setup.components.scheduler_name;
  state_.recipe_sha256 = setup.recipe_sha256;
  if (plan_.total_steps() > 0) {
    const StepSlice first = plan_.slice(0);
    for (int64_t b = first.first_batch; b < first.end_batch; ++b)
      effective_batch_ += static_cast<int64_t>(plan_.batches(first.epoch).at(b).rows.size());
  }
  if (setup.distributed.group)
    gradient_sync_ = std::make_unique<dist::GradientSynchronizer>(*setup.distributed.group, setup.trainable.tensors,
                                                                  setup.distributed.bucket_bytes);
}

bool Trainer::due(std::optional<int64_t> every, std::optional<int64_t> per_epoch) const {
  if (every) return state_.global_step % *every == 0;
  if (per_epoch) {
    const int64_t interval = std::max<int64_t>(1, plan_.steps_per_epoch() / *per_epoch);
    return state_.global_step % interval == 0;
  }
  return false;
}

void Trainer::log_metrics(const std::string& phase, std::vector<std::pair<std::string, double>> values) {
  sdk::MetricRecord record;
  record.step = state_.global_step;
  record.phase = phase;
  record.wall_time = wall_time_now();
  record.values = std::move(values);
  nlohmann::json entry = {{"step", record.step}, {"phase", phase}};
  for (const auto& [k, v] : record.values) entry[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  state_.log_history.push_back(entry);
  for (auto& logger : s_.components.loggers) logger->log_metrics(record);
}

void Trainer::log_text(const std::string& tag, const std::string& text) {
  for (auto& logger : s_.components.loggers) logger->log_text(state_.global_step, tag, text);
}

void Trainer::log_train(double grad_norm) {
  const double now = wall_time_now();
  const double elapsed = std::max(now - window_start_time_, 1e-9);
  const auto steps = static_cast<double>(std::max<int64_t>(state_.window_steps, 1));
  std::vector<std::pair<std::string, double>> values = {
      {"loss", state_.window_loss / steps},
      {"lr", state_.learning_rate},
      {"grad_norm", grad_norm},
      {"epoch", state_.epoch},
      {"tokens_per_second", static_cast<double>(state_.window_tokens) / elapsed},  // the whole job's
      {"effective_batch", static_cast<double>(effective_batch_)},
      {"peak_rss_mb", peak_rss_mib()},
      {"threads", static_cast<double>(at::get_num_threads())},  // this step's; sharing may change it (runtime.h)
      {"total_steps", static_cast<double>(state_.total_steps)}};
  if (optimizer_state_bytes_) values.emplace_back("optimizer_state_bytes", *optimizer_state_bytes_);
  values.emplace_back("batch_hash", last_batch_hash_);  // of the window's last step
  const ModelConfig& model = s_.base.model->config();
  if (model.is_moe() && model.output_router_logits)
    values.emplace_back("router_aux_loss", last_router_aux_loss_);  // the window's last step, before its coefficient
  if (s_.distributed.group) {
    values.emplace_back("world_size", static_cast<double>(s_.distributed.world_size()));
    values.emplace_back("communication_seconds_per_step", window_communication_seconds_ / steps);
    values.emplace_back("seconds_per_step", elapsed / steps);
  }
  log_metrics("train", std::move(values));
  if (scaler_.enabled()) log_metrics("train", {{"loss_scale", scaler_.scale()}});
  state_.window_loss = 0.0;
  state_.window_steps = 0;
  state_.window_tokens = 0;
  window_communication_seconds_ = 0.0;
  window_start_time_ = now;
}

bool Trainer::evaluate_and_log() {
  if (s_.data.validation.empty()) return false;
  const EvalResult r = evaluate_sharded();
  std::vector<std::pair<std::string, double>> values = {{"loss", r.loss}, {"perplexity", r.perplexity}};
  if (r.exact_match) values.emplace_back("exact_match", *r.exact_match);
  log_metrics("eval", values);
  if (!first_eval_) first_eval_ = EvalRecord{state_.global_step, values};
  last_eval_ = EvalRecord{state_.global_step, values};
  for (size_t i = 0; i < std::min<size_t>(r.answers.size(), 3); ++i)
    log_text("eval/answer_" + std::to_string(i),
             "expected: " + r.answers[i].expected + "\ngenerated: " + r.answers[i].generated);

  const std::string metric = metric_key(s_.options.metric_for_best.value_or("eval_loss"));
  double value = r.loss;
  if (metric == "perplexity") value = r.perplexity;
  if (metric == "exact_match") value = r.exact_match.value_or(0.0);
  const bool higher_better = metric_higher_is_better(metric);
  const bool improved = !state_.best_metric || (higher_better ? value > *state_.best_metric : value < *state_.best_metric);
  if (improved) {
    state_.best_metric = value;
    state_.best_checkpoint = checkpoint_name(state_.global_step);
    state_.evals_without_improvement = 0;
  } else {
    ++state_.evals_without_improvement;
  }
  return s_.options.early_stopping_patience && state_.evals_without_improvement >= *s_.options.early_stopping_patience;
}

// Each rank evaluates its share (evaluation.h); the sums are reduced here.
EvalResult Trainer::evaluate_sharded() {
  const int rank = s_.distributed.rank(), world = s_.distributed.world_size();
  EvalResult r = evaluate(*s_.base.model, s_.data.validation, s_.options.eval_batch_size, s_.collate, s_.precision,
                          *s_.tokenizer, s_.generation_eval, EvalShard{rank, world});
  if (!s_.distributed.group) return r;
  at::Tensor sums = at::tensor({r.loss_sum, static_cast<double>(r.target_tokens), static_cast<double>(r.correct),
                                static_cast<double>(r.answered)}, at::kDouble).to(s_.distributed.group->device());
  s_.distributed.group->all_reduce_sum(sums, "the evaluation at step " + std::to_string(state_.global_step));
  sums = sums.to(at::kCPU);
  r.loss_sum = sums[0].item<double>();
  r.target_tokens = static_cast<int64_t>(sums[1].item<double>());
  r.correct = static_cast<int64_t>(sums[2].item<double>());
  r.answered = static_cast<int64_t>(sums[3].item<double>());
  finish_eval_result(r);
  return r;
}

void Trainer::start_run() {
  s_.base.model->module().train();
  if (state_.global_step == 0) {
    log_metrics("train", {{"total_steps", static_cast<double>(state_.total_steps)},
                          {"effective_batch", static_cast<double>(effective_batch_)}});
    if (s_.options.eval_before_training) evaluate_and_log();
  }
  window_start_time_ = wall_time_now();
}

void Trainer::after_step(const StepResult& step) {
  ++state_.global_step;
  state_.epoch = plan_.epoch_progress(state_.global_step);
  state_.window_loss += step.loss;
  ++state_.window_steps;
  state_.window_tokens += step.tokens;
  last_batch_hash_ = step.batch_hash;
  last_router_aux_loss_ = step.router_aux_loss;
  if (s_.distributed.group) window_communication_seconds_ += s_.distributed.group->take_communication_seconds();
  if (!optimizer_state_bytes_) {
    optimizer_state_bytes_ = state_bytes(s_.components.optimizer->state_by_name());
    if (s_.distributed.group)
      spdlog::info("optimizer state on this rank: {} bytes", static_cast<int64_t>(*optimizer_state_bytes_));
  }
  if (s_.trainable.adapter) {
    sdk::TrainerEvent event;
    event.step = state_.global_step;
    event.total_steps = state_.total_steps;
    event.optimizer = s_.components.optimizer.get();
    s_.trainable.adapter->on_event(event, *s_.base.model);
  }
  if (state_.global_step % s_.options.logging_steps == 0 || state_.global_step == state_.total_steps)
    log_train(step.grad_norm);
}

// A step refused for a non-finite gradient, learning rate or updated tensor:
// the state before it is saved when it is still intact in memory; otherwise
// the last checkpoint is the last finite state.
std::string Trainer::non_finite_update_message(const StepResult& step) {
  const std::string head = "step " + std::to_string(state_.global_step + 1) + ": " + step.non_finite +
                           " is not finite (NaN or Inf); ";
  if (!step.update_applied)
    return head + "the update was not applied (lower the learning rate, or check the data); the state before this "
                  "step is saved in " + save_checkpoint().string();
  const std::optional<fs::path> last = latest_checkpoint(s_.options.run_dir);
  return head + "nothing of this step is saved (lower the learning rate); the last finite state is " +
         (last ? last->string() : std::string("the base model: no checkpoint was saved yet"));
}

bool Trainer::stop_reason(const StepResult& step, bool early_stop, TrainingOutcome& outcome) {
  bool watchdog = false;
  if (s_.options.loss_watchdog_threshold) {
    state_.watchdog_strikes = step.loss > *s_.options.loss_watchdog_threshold ? state_.watchdog_strikes + 1 : 0;
    watchdog = state_.watchdog_strikes >= s_.options.loss_watchdog_patience;
  }
  const bool save = due(s_.options.save_steps, s_.options.saves_per_epoch) || watchdog || step.signal_seen;
  const fs::path saved = save ? save_checkpoint() : fs::path();
  const std::string at_step = std::to_string(state_.global_step);
  if (watchdog) {
    outcome.status = TrainingOutcome::Status::Stopped;
    outcome.message = "loss watchdog: the loss stayed above " + std::to_string(*s_.options.loss_watchdog_threshold) +
                      " for " + std::to_string(state_.watchdog_strikes) + " steps (last " + std::to_string(step.loss) +
                      "); stopped at step " + at_step + ", checkpoint " + saved.string();
  } else if (step.signal_seen) {
    const int signal = stop_signal_received() != 0 ? stop_signal_received() : SIGTERM;
    outcome.status = TrainingOutcome::Status::Interrupted;
    outcome.signal = signal;
    outcome.message = signal_name(signal) + ": stopped after step " + at_step +
                      "; resume with train.resume_from_checkpoint = \"" + saved.string() + "\" (or \"auto\")";
  } else if (early_stop) {
    outcome.message = "early stopping: no improvement in " + std::to_string(state_.evals_without_improvement) +
                      " evaluations; stopped at step " + at_step;
  }
  return watchdog || step.signal_seen || early_stop;
}

void Trainer::train_steps(TrainingOutcome& outcome) {
  start_run();
  const std::optional<std::string> profile_path = requested_profile_path();
  const int64_t profile_step = profile_path ? requested_profile_step() : 0;
  while (state_.global_step < state_.total_steps) {
    rebalance_threads();  // this run's share of the cores, as other ftcore runs start and end (runtime.h)
    std::optional<OpProfile> profile;
    if (profile_path && state_.global_step + 1 == profile_step) profile.emplace(*profile_path);
    const StepResult step = train_step();
    if (!step.non_finite.empty()) {
      outcome.status = TrainingOutcome::Status::Stopped;
      outcome.message = non_finite_update_message(step);
      return;
    }
    if (!step.finite) {
      outcome.status = TrainingOutcome::Status::Stopped;
      outcome.message = "the loss of step " + std::to_string(state_.global_step + 1) + " is " +
                        (std::isnan(step.loss) ? "NaN" : "infinite") +
                        "; stopped before updating (lower the learning rate, or check the data); the state before "
                        "this step is saved in " + save_checkpoint().string();
      return;
    }
    {
      RECORD_USER_SCOPE("ftcore::after_step (adapter event, logging)");
      after_step(step);
    }
    profile.reset();
    const bool last = state_.global_step == state_.total_steps;
    const bool early_stop = (due(s_.options.eval_steps, s_.options.evals_per_epoch) || last) && evaluate_and_log();
    if (stop_reason(step, early_stop, outcome)) return;
  }
}

void Trainer::stop_for_signal(const StopRequested& stop, TrainingOutcome& outcome) {
  for (const at::Tensor& p : s_.trainable.tensors) p.mutable_grad() = at::Tensor();  // a cut step's, never applied
  outcome.status = TrainingOutcome::Status::Interrupted;
  outcome.signal = stop.signal();
  const std::string head = std::string(stop.what()) + ": stopped at step " + std::to_string(state_.global_step);
  if (state_.global_step > last_saved_step_) {
    restore_step_start_rng();
    const fs::path saved = save_checkpoint();
    outcome.message = head + "; resume with train.resume_from_checkpoint = \"" + saved.string() + "\" (or \"auto\")";
  } else if (const std::optional<fs::path> last = latest_checkpoint(s_.options.run_dir)) {
    outcome.message = head + "; no step since " + last->string() + ", which train.resume_from_checkpoint = \"auto\" resumes";
  } else {
    outcome.message = head + ", before the first step completed; nothing to save";
  }
}

TrainingOutcome Trainer::run() {
  TrainingOutcome outcome;
  outcome.run_dir = s_.options.run_dir;
  try {
    train_steps(outcome);
  } catch (const StopRequested& stop) {
    stop_for_signal(stop, outcome);
  }
  if (outcome.status == TrainingOutcome::Status::Completed) {
    write_final_outputs();
    if (outcome.message.empty())
      outcome.message = "trained " + std::to_string(state_.global_step) + " steps; outputs in " + s_.options.run_dir.string();
  }
  for (auto& logger : s_.components.loggers) logger->flush();
  outcome.first_eval = first_eval_;
  outcome.last_eval = last_eval_;
  return outcome;
}

}  // namespace ftcore::train

// The training loop. One optimizer step:
//
//   N = target tokens of all the step's micro-batches
//   for each micro-batch b:  (summed_loss(b) / N * loss_scale).backward()
//   grad_norm = ||g||_2 over every trainable tensor (logged before clipping)
//   g *= min(1, max_grad_norm / (grad_norm + 1e-6))        (torch's clip_grad_norm_)
//   lr = base_lr x scheduler.factor(step, total) x adapter.lr_multiplier(step)
//   optimizer.step() with each group at lr x lr_scale
//
// so the logged loss of a step is its mean per-target-token loss whatever the
// micro-batch size, as transformers' num_items_in_batch normalisation gives.
#include "trainer.h"

#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include "ftcore/safetensors.h"
#include "next_token_loss.h"
#include "stop_signals.h"

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

}  // namespace

Trainer::Trainer(TrainingSetup& setup)
    : s_(setup),
      plan_(setup.sampler, setup.sampler_input, setup.options.gradient_accumulation_steps, setup.options.num_epochs,
            setup.options.max_steps),
      scaler_(setup.precision.name == "fp16") {
  state_.total_steps = plan_.total_steps();
  state_.scheduler = setup.scheduler_name;
  state_.recipe_sha256 = setup.recipe_sha256;
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
  for (auto& logger : s_.loggers) logger->log_metrics(record);
}

void Trainer::log_text(const std::string& tag, const std::string& text) {
  for (auto& logger : s_.loggers) logger->log_text(state_.global_step, tag, text);
}

std::vector<TrainBatch> Trainer::collate_step(const StepSlice& slice) const {
  const std::vector<sdk::Batch>& epoch = plan_.batches(slice.epoch);
  std::vector<TrainBatch> out;
  for (int64_t b = slice.first_batch; b < slice.end_batch; ++b) {
    const auto& rows = epoch[static_cast<size_t>(b)].rows;
    // auto_micro_batch splits each sampler batch into equal parts of its rows.
    const auto splits = static_cast<size_t>(std::min<int64_t>(state_.micro_batch_splits, rows.size()));
    const size_t per_part = (rows.size() + splits - 1) / splits;
    for (size_t start = 0; start < rows.size(); start += per_part) {
      std::vector<std::vector<const Example*>> part;
      for (size_t r = start; r < std::min(rows.size(), start + per_part); ++r) {
        std::vector<const Example*> row;
        for (int64_t index : rows[r]) row.push_back(&s_.data.train.at(static_cast<size_t>(index)));
        part.push_back(std::move(row));
      }
      out.push_back(collate(part, s_.collate));
    }
  }
  return out;
}

// FTCORE_DEBUG_DUMP_BATCHES=DIR writes each micro-batch as
// DIR/step-<k>-micro-<i>.safetensors: reference tests replay the exact
// batches through transformers + PEFT.
static void dump_batches(const std::vector<TrainBatch>& batches, int64_t step) {
  static const char* dir = std::getenv("FTCORE_DEBUG_DUMP_BATCHES");
  if (!dir) return;
  for (size_t i = 0; i < batches.size(); ++i) {
    sdk::TensorMap m;
    m.add("input_ids", batches[i].input_ids);
    m.add("labels", batches[i].labels);
    m.add("position_ids", batches[i].position_ids);
    m.add("sequence_ids", batches[i].sequence_ids);
    safetensors::write_file(fs::path(dir) / ("step-" + std::to_string(step) + "-micro-" + std::to_string(i) + ".safetensors"), m);
  }
}

void Trainer::run_micro_batches(const std::vector<TrainBatch>& batches, int64_t targets, double& loss_sum) {
  dump_batches(batches, state_.global_step + 1);
  const double normaliser = static_cast<double>(std::max<int64_t>(targets, 1));
  for (const TrainBatch& batch : batches) {
    at::Tensor loss;
    {
      AutocastScope autocast(s_.precision, s_.model->device());
      loss = summed_next_token_loss(*s_.model, batch);
    }
    (loss * (scaler_.scale() / normaliser)).backward();
    loss_sum += loss.item<double>();
  }
}

double Trainer::clip_gradients() {
  std::vector<at::Tensor> norms;
  for (const at::Tensor& p : s_.trainable)
    if (p.grad().defined()) norms.push_back(at::linalg_vector_norm(p.grad().to(at::kFloat), 2));
  if (norms.empty()) return 0.0;
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2);
  const double norm = total.item<double>();
  if (s_.options.max_grad_norm > 0.0) {
    const double coefficient = s_.options.max_grad_norm / (norm + 1e-6);
    if (coefficient < 1.0)
      for (const at::Tensor& p : s_.trainable)
        if (p.grad().defined()) p.grad().mul_(coefficient);
  }
  return norm;
}

bool Trainer::train_step(double& step_loss, double& grad_norm, int64_t& tokens) {
  const StepSlice slice = plan_.slice(state_.global_step);
  for (const at::Tensor& p : s_.trainable) p.mutable_grad() = at::Tensor();
  double loss_sum = 0.0;
  int64_t targets = 0;
  while (true) {
    std::vector<TrainBatch> batches = collate_step(slice);
    targets = 0;
    tokens = 0;
    for (const auto& b : batches) targets += b.target_tokens, tokens += b.tokens;
    try {
      loss_sum = 0.0;
      run_micro_batches(batches, targets, loss_sum);
      break;
    } catch (const c10::OutOfMemoryError& e) {
      const int64_t rows = s_.options.micro_batch_size / state_.micro_batch_splits;
      if (!s_.options.auto_micro_batch || rows <= 1) throw;
      for (const at::Tensor& p : s_.trainable) p.mutable_grad() = at::Tensor();
      state_.micro_batch_splits *= 2;
      spdlog::warn("out of memory at step {}: micro_batch_size {} -> {}, gradient_accumulation_steps {} -> {} "
                   "(same effective batch); retrying the step",
                   state_.global_step + 1, rows, rows / 2,
                   s_.options.gradient_accumulation_steps * state_.micro_batch_splits / 2,
                   s_.options.gradient_accumulation_steps * state_.micro_batch_splits);
    }
  }
  step_loss = loss_sum / static_cast<double>(std::max<int64_t>(targets, 1));
  if (!std::isfinite(step_loss)) return false;

  const bool finite_grads = scaler_.unscale(s_.trainable);
  grad_norm = finite_grads ? clip_gradients() : std::numeric_limits<double>::infinity();
  state_.learning_rate = s_.base_lr * s_.scheduler->factor(state_.global_step, state_.total_steps) *
                         (s_.adapter ? s_.adapter->lr_multiplier(state_.global_step) : 1.0);
  s_.optimizer->set_base_lr(state_.learning_rate);
  if (finite_grads) s_.optimizer->step();
  scaler_.update(!finite_grads);
  return true;
}

void Trainer::log_train(double grad_norm) {
  const double now = wall_time_now();
  const double elapsed = std::max(now - window_start_time_, 1e-9);
  const int64_t effective_batch = s_.options.micro_batch_size * s_.options.gradient_accumulation_steps;
  log_metrics("train", {{"loss", state_.window_loss / static_cast<double>(std::max<int64_t>(state_.window_steps, 1))},
                        {"lr", state_.learning_rate},
                        {"grad_norm", grad_norm},
                        {"epoch", state_.epoch},
                        {"tokens_per_second", static_cast<double>(state_.window_tokens) / elapsed},
                        {"effective_batch", static_cast<double>(effective_batch)},
                        {"peak_rss_mb", peak_rss_mib()},
                        {"total_steps", static_cast<double>(state_.total_steps)}});
  if (scaler_.enabled()) log_metrics("train", {{"loss_scale", scaler_.scale()}});
  state_.window_loss = 0.0;
  state_.window_steps = 0;
  state_.window_tokens = 0;
  window_start_time_ = now;
}

bool Trainer::evaluate_and_log(bool final_eval) {
  if (s_.data.validation.empty()) return false;
  CollateOptions collate = s_.collate;
  EvalResult r = evaluate(*s_.model, s_.data.validation, s_.options.eval_batch_size, collate, s_.precision,
                          *s_.tokenizer, s_.generation_eval);
  std::vector<std::pair<std::string, double>> values = {{"loss", r.loss}, {"perplexity", r.perplexity}};
  if (r.exact_match) values.emplace_back("exact_match", *r.exact_match);
  log_metrics("eval", values);
  if (first_eval_.empty()) first_eval_ = values;
  last_eval_ = values;
  for (size_t i = 0; i < std::min<size_t>(r.answers.size(), 3); ++i)
    log_text("eval/answer_" + std::to_string(i),
             "expected: " + r.answers[i].expected + "\ngenerated: " + r.answers[i].generated);
  (void)final_eval;

  const std::string metric = metric_key(s_.options.metric_for_best.value_or("eval_loss"));
  double value = r.loss;
  if (metric == "perplexity") value = r.perplexity;
  if (metric == "exact_match") value = r.exact_match.value_or(0.0);
  const bool higher_better = metric_higher_is_better(metric);
  last_eval_metric_ = value;
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

TrainingOutcome Trainer::run(const std::optional<fs::path>& checkpoint) {
  TrainingOutcome outcome;
  outcome.run_dir = s_.options.run_dir;
  if (checkpoint) resume_from(*checkpoint);
  StopSignals signals;
  s_.model->module().train();
  window_start_time_ = wall_time_now();
  if (state_.global_step == 0) {
    log_metrics("train", {{"total_steps", static_cast<double>(state_.total_steps)},
                          {"effective_batch", static_cast<double>(s_.options.micro_batch_size *
                                                                  s_.options.gradient_accumulation_steps)}});
    if (s_.options.eval_before_training) evaluate_and_log(false);
    window_start_time_ = wall_time_now();
  }
  bool evaluated_at_end = false;
  while (state_.global_step < state_.total_steps) {
    double loss = 0.0, grad_norm = 0.0;
    int64_t tokens = 0;
    if (!train_step(loss, grad_norm, tokens)) {
      outcome.status = TrainingOutcome::Status::Stopped;
      outcome.message = "the loss of step " + std::to_string(state_.global_step + 1) + " is " +
                        (std::isnan(loss) ? "NaN" : "infinite") +
                        "; stopped before updating (lower the learning rate, or check the data); the state before this step is saved in " +
                        save_checkpoint().string();
      break;
    }
    ++state_.global_step;
    state_.epoch = plan_.epoch_progress(state_.global_step);
    state_.window_loss += loss;
    ++state_.window_steps;
    state_.window_tokens += tokens;
    last_grad_norm_ = grad_norm;
    if (s_.adapter) {
      sdk::TrainerEvent event;
      event.step = state_.global_step;
      event.total_steps = state_.total_steps;
      event.optimizer = s_.optimizer.get();
      s_.adapter->on_event(event, *s_.model);
    }
    const bool last = state_.global_step == state_.total_steps;
    if (state_.global_step % s_.options.logging_steps == 0 || last) log_train(grad_norm);

    bool early_stop = false;
    if (due(s_.options.eval_steps, s_.options.evals_per_epoch) || last) {
      early_stop = evaluate_and_log(last);
      evaluated_at_end = last || early_stop;
    }
    bool watchdog = false;
    if (s_.options.loss_watchdog_threshold) {
      state_.watchdog_strikes = loss > *s_.options.loss_watchdog_threshold ? state_.watchdog_strikes + 1 : 0;
      watchdog = state_.watchdog_strikes >= s_.options.loss_watchdog_patience;
    }
    const int signal = StopSignals::received();
    const bool save = due(s_.options.save_steps, s_.options.saves_per_epoch) || watchdog || signal != 0;
    fs::path saved;
    if (save) saved = save_checkpoint();
    if (watchdog) {
      outcome.status = TrainingOutcome::Status::Stopped;
      outcome.message = "loss watchdog: the loss stayed above " + std::to_string(*s_.options.loss_watchdog_threshold) +
                        " for " + std::to_string(state_.watchdog_strikes) + " steps (last " + std::to_string(loss) +
                        "); stopped at step " + std::to_string(state_.global_step) + ", checkpoint " + saved.string();
      break;
    }
    if (signal != 0) {
      outcome.status = TrainingOutcome::Status::Interrupted;
      outcome.signal = signal;
      outcome.message = std::string(signal == SIGINT ? "SIGINT" : "SIGTERM") + ": stopped after step " +
                        std::to_string(state_.global_step) + "; resume with train.resume_from_checkpoint = \"" +
                        saved.string() + "\" (or \"auto\")";
      break;
    }
    if (early_stop) {
      outcome.message = "early stopping: no improvement in " + std::to_string(state_.evals_without_improvement) +
                        " evaluations; stopped at step " + std::to_string(state_.global_step);
      break;
    }
  }
  if (outcome.status == TrainingOutcome::Status::Completed) {
    (void)evaluated_at_end;
    write_final_outputs();
    if (outcome.message.empty())
      outcome.message = "trained " + std::to_string(state_.global_step) + " steps; outputs in " + s_.options.run_dir.string();
  }
  for (auto& logger : s_.loggers) logger->flush();
  outcome.first_eval = first_eval_;
  outcome.last_eval = last_eval_;
  return outcome;
}

}  // namespace ftcore::train

// The training loop over a fully built setup (run_training.cpp builds it):
// micro-batches -> token-normalised loss -> accumulation -> clipping ->
// optimizer step at the scheduled lr -> adapter events -> logs, evals,
// checkpoints; resumable from any checkpoint, bit for bit on CPU. With a
// process group, each rank takes its shard of every global batch and the
// gradients, losses and evaluations are summed across ranks (dist/).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "../dist/gradient_sync.h"
#include "../dist/optimizer_sharding.h"
#include "../dist/process_group.h"
#include "ftcore/collate.h"
#include "ftcore/dataset.h"
#include "ftcore/model.h"
#include "ftcore/sdk/adapter.h"
#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/sampler.h"
#include "ftcore/sdk/scheduler.h"
#include "ftcore/stop_request.h"
#include "ftcore/tokenizer.h"
#include "ftcore/trainer.h"
#include "checkpoint.h"
#include "evaluation.h"
#include "precision.h"
#include "train_options.h"
#include "training_plan.h"

namespace ftcore::train {

// The base model and what the run's outputs need to know of it.
struct BaseModel {
  std::shared_ptr<sdk::Quantizer> quantizer;  // a quantized base's (QLoRA); null: dense
  std::shared_ptr<Model> model;
  std::string config_json;  // config.json of the base (full fine-tune outputs)
  std::string dir;          // absolute; written as the adapter's base_model_name_or_path
};

// What the optimizer updates: the adapter's tensors, or every weight.
struct TrainableSet {
  std::shared_ptr<sdk::Adapter> adapter;   // null: full fine-tune
  std::vector<sdk::ParamGroupSpec> groups;  // weight decay split applied
  std::vector<at::Tensor> tensors;          // every tensor of `groups`
};

// The plugins the recipe names, built.
struct Components {
  std::shared_ptr<const sdk::Sampler> sampler;
  std::string sampler_name;
  sdk::SamplerInput sampler_input;  // batch_size: rows of a GLOBAL micro-batch (all ranks)
  std::shared_ptr<sdk::Optimizer> optimizer;  // over this rank's tensors when sharded
  double base_lr = 0.0;  // the optimizer's lr option, before scheduling
  std::shared_ptr<sdk::Scheduler> scheduler;
  std::string scheduler_name;
  std::vector<std::shared_ptr<sdk::Logger>> loggers;  // rank 0's only
};

// Data parallelism; all null/empty in a one-process run.
struct Distributed {
  std::shared_ptr<dist::ProcessGroup> group;
  std::unique_ptr<dist::OptimizerSharding> sharding;  // ZeRO-1
  int64_t bucket_bytes = 25 << 20;
  bool writes_outputs() const { return !group || group->rank() == 0; }
  int rank() const { return group ? group->rank() : 0; }
  int world_size() const { return group ? group->size() : 1; }
};

struct TrainingSetup {
  TrainOptions options;
  // Declared before the model so it is destroyed after it: the adapter keeps
  // its plugin library loaded, and the model holds the adapter's modules.
  TrainableSet trainable;
  BaseModel base;
  std::shared_ptr<Tokenizer> tokenizer;
  PreparedData data;
  Components components;
  CollateOptions collate;
  Precision precision;
  GenerationEvalOptions generation_eval;
  std::string recipe_sha256;
  Distributed distributed;
};

// One optimizer step's outcome.
struct StepResult {
  bool finite = true;  // false: the loss was NaN/Inf and nothing was updated
  double loss = 0.0;   // mean per target token over the global batch
  double grad_norm = 0.0;
  int64_t tokens = 0;  // of the global batch
  bool signal_seen = false;  // SIGINT/SIGTERM on any rank
  double batch_hash = 0.0;   // of this rank's token ids (trainer_step.cpp)
  // Not empty: what was not finite, e.g. "the gradient of model.layers.0...".
  // Found before the update (a gradient, the learning rate): nothing was
  // updated. Found after it (`update_applied`): the trainable tensors hold
  // the non-finite values, and must not be saved.
  std::string non_finite;
  bool update_applied = false;
  double router_aux_loss = 0.0;  // MoE with output_router_logits: this rank's mean load-balancing loss
};

class Trainer {
 public:
  explicit Trainer(TrainingSetup& setup);
  // Before run(): loads a checkpoint folder (already validated to exist).
  void resume_from(const std::filesystem::path& dir);
  int64_t global_step() const { return state_.global_step; }
  TrainingOutcome run();

 private:
  void start_run();
  // The steps until the end, a stop condition, or a StopRequested thrown.
  void train_steps(TrainingOutcome& outcome);
  StepResult train_step();
  void after_step(const StepResult& step);
  // Why the run stops after this step, if it does ("" = go on); fills `outcome`.
  bool stop_reason(const StepResult& step, bool early_stop, TrainingOutcome& outcome);
  std::string non_finite_update_message(const StepResult& step);
  // A SIGINT/SIGTERM seen inside a phase (ftcore/stop_request.h): saves a
  // checkpoint when a step completed since the last one.
  void stop_for_signal(const StopRequested& stop, TrainingOutcome& outcome);
  // The CPU generator at the start of the current step: a step cut by a
  // signal has drawn dropout masks, and its checkpoint must not keep them.
  void remember_step_start_rng();
  void restore_step_start_rng();
  // This rank's micro-batches of the current step, split auto_micro_batch times.
  std::vector<TrainBatch> collate_step(const StepSlice& slice) const;
  // Returns the summed loss; `aux_seen` gets the mean router aux loss of the micro-batches (MoE, else 0).
  double run_micro_batches(const std::vector<TrainBatch>& batches, int64_t targets, double* aux_seen);
  void all_reduce_counts(int64_t& targets, int64_t& tokens);
  double clip_gradients();
  void log_train(double grad_norm);
  // Returns true when early stopping says stop.
  bool evaluate_and_log();
  EvalResult evaluate_sharded();
  std::filesystem::path save_checkpoint();
  void write_final_outputs();
  sdk::TensorMap weights_to_save() const;
  std::string adapter_config_text() const;
  void log_metrics(const std::string& phase, std::vector<std::pair<std::string, double>> values);
  void log_text(const std::string& tag, const std::string& text);
  bool due(std::optional<int64_t> every, std::optional<int64_t> per_epoch) const;

  TrainingSetup& s_;
  TrainingPlan plan_;
  DynamicLossScaler scaler_;
  TrainerState state_;
  std::unique_ptr<dist::GradientSynchronizer> gradient_sync_;
  double window_start_time_ = 0.0;
  double window_communication_seconds_ = 0.0;
  double last_batch_hash_ = 0.0;
  double last_router_aux_loss_ = 0.0;
  std::optional<double> optimizer_state_bytes_;  // measured after the first step
  std::optional<EvalRecord> first_eval_, last_eval_;
  int64_t effective_batch_ = 0;  // rows of the first step, whole job: fewer than configured on a small set
  int64_t last_saved_step_ = 0;  // of the last checkpoint written or resumed from
  at::Tensor step_start_rng_;    // defined while a step runs (single process)
};

// Seconds since the Unix epoch (log records' wall_time).
double wall_time_now();
// Peak resident set size of this process, in MiB.
double peak_rss_mib();

}  // namespace ftcore::train

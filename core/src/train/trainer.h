// The training loop over a fully built setup (run_training.cpp builds it):
// micro-batches -> token-normalised loss -> accumulation -> clipping ->
// optimizer step at the scheduled lr -> adapter events -> logs, evals,
// checkpoints; resumable from any checkpoint, bit for bit on CPU.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ftcore/collate.h"
#include "ftcore/dataset.h"
#include "ftcore/model.h"
#include "ftcore/sdk/adapter.h"
#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/sampler.h"
#include "ftcore/sdk/scheduler.h"
#include "ftcore/tokenizer.h"
#include "ftcore/trainer.h"
#include "checkpoint.h"
#include "evaluation.h"
#include "precision.h"
#include "train_options.h"
#include "training_plan.h"

namespace ftcore::train {

struct TrainingSetup {
  TrainOptions options;
  // Declared before the model so it is destroyed after it: the adapter keeps
  // its plugin library loaded, and the model holds the adapter's modules.
  std::shared_ptr<sdk::Adapter> adapter;  // null: full fine-tune
  std::shared_ptr<sdk::Quantizer> quantizer;  // a quantized base's (QLoRA); null: dense
  std::shared_ptr<Model> model;
  std::shared_ptr<Tokenizer> tokenizer;
  PreparedData data;
  std::shared_ptr<sdk::Optimizer> optimizer;
  double base_lr = 0.0;  // the optimizer's lr option, before scheduling
  std::shared_ptr<sdk::Scheduler> scheduler;
  std::string scheduler_name;
  std::shared_ptr<const sdk::Sampler> sampler;
  sdk::SamplerInput sampler_input;
  std::vector<std::shared_ptr<sdk::Logger>> loggers;
  CollateOptions collate;
  Precision precision;
  GenerationEvalOptions generation_eval;
  std::string model_config_json;  // config.json of the base (full fine-tune outputs)
  std::string model_dir;          // absolute; written as the adapter's base_model_name_or_path
  std::string recipe_sha256;
  std::vector<at::Tensor> trainable;  // every parameter the optimizer updates
};

class Trainer {
 public:
  explicit Trainer(TrainingSetup& setup);
  // Resumes from `checkpoint` when given (already validated to exist).
  TrainingOutcome run(const std::optional<std::filesystem::path>& checkpoint);

 private:
  void resume_from(const std::filesystem::path& dir);
  // One optimizer step; false when the loss was not finite (nothing updated).
  bool train_step(double& step_loss, double& grad_norm, int64_t& tokens);
  // Micro-batches of the current step, split auto_micro_batch times.
  std::vector<TrainBatch> collate_step(const StepSlice& slice) const;
  void run_micro_batches(const std::vector<TrainBatch>& batches, int64_t targets, double& loss_sum);
  double clip_gradients();
  void log_train(double grad_norm);
  // Returns true when early stopping says stop.
  bool evaluate_and_log(bool final_eval);
  std::filesystem::path save_checkpoint();
  void write_final_outputs();
  std::string adapter_config_text() const;
  void log_metrics(const std::string& phase, std::vector<std::pair<std::string, double>> values);
  void log_text(const std::string& tag, const std::string& text);
  bool due(std::optional<int64_t> every, std::optional<int64_t> per_epoch) const;

  TrainingSetup& s_;
  TrainingPlan plan_;
  DynamicLossScaler scaler_;
  TrainerState state_;
  double last_grad_norm_ = 0.0;
  double window_start_time_ = 0.0;
  std::optional<double> last_eval_metric_;
  std::vector<std::pair<std::string, double>> first_eval_, last_eval_;
};

// Seconds since the Unix epoch (log records' wall_time).
double wall_time_now();
// Peak resident set size of this process, in MiB.
double peak_rss_mib();

}  // namespace ftcore::train

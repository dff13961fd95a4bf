// The core's own recipe sections, declared as ParamSpecs like any plugin's,
// so validation, `ftcore plugins describe` and docs/recipes.md treat them alike.
// Later parts of the core (model, data, trainer) read these options.
#include "ftcore/recipe.h"

namespace ftcore {

namespace {

sdk::ParamSpec model_spec() {
  sdk::ParamSpec s;
  s.add_string("path", std::nullopt).make_required().with_doc("HF model folder or a .gguf file, relative to the recipe.");
  s.add_enum("dtype", {"auto", "bf16", "fp16", "fp32"}, "auto")
      .with_doc("Weights dtype; auto keeps the checkpoint's torch_dtype.");
  s.add_string("tokenizer_path", std::nullopt).with_doc("Tokenizer folder when not the model folder, relative to the recipe.");
  s.add_string("chat_template", std::nullopt)
      .with_doc("Chat template name (chatml, llama-2, llama-3, qwen3, smollm3, gemma-2, gemma-3, phi-3, phi-3.5, phi-4, "
                "phi-4-mini) or text.");
  s.add_bool("enable_thinking", true)
      .with_doc("Thinking mode of the qwen3 and smollm3 chat templates (their enable_thinking); smollm3's system "
                "message flags /think and /no_think override it.");
  s.add_enum("device", {"auto", "cpu", "cuda"}, "auto").with_doc("Where to train; auto picks CUDA when present.");
  return s;
}

sdk::ParamSpec data_spec() {
  sdk::ParamSpec s;
  s.add_string("path", std::nullopt).make_required().with_doc("JSONL or JSON dataset file, relative to the recipe.");
  s.add_enum("format", {"alpaca", "completion", "chat", "template"}, "alpaca").with_doc("Row format.");
  s.add_string("field", "text").with_doc("Text field of the completion format.");
  s.add_string("template", std::nullopt).with_doc("Prompt template with {instruction} and {input} (format = template).");
  s.add_bool("train_on_inputs", false).with_doc("Also train on prompt tokens (false masks them out of the loss).");
  s.add_int("sequence_len", 2048).at_least(1).with_doc("Tokens per example; longer ones are truncated.");
  s.add_bool("pad_to_sequence_len", false).with_doc("Pad every batch to sequence_len.");
  s.add_enum("padding_side", {"right", "left"}, "right").with_doc("Side padding goes on.");
  s.add_bool("sample_packing", false).with_doc("Pack several examples per row (use a packing sampler).");
  s.add_float("val_set_size", 0.0).with_range(0.0, 1.0).with_doc("Fraction held out for evaluation.");
  s.add_string("dataset_prepared_path", std::nullopt).with_doc("Folder of the tokenized cache, relative to the working folder.");
  s.add_bool("skip_bad_rows", false).with_doc("Skip (and count) malformed rows instead of failing.");
  return s;
}

sdk::ParamSpec train_spec() {
  sdk::ParamSpec s;
  s.add_string("output_dir", "runs").with_doc("Parent folder of run folders, relative to the working folder.");
  s.add_string("run_name", std::nullopt).with_doc("Run folder name; defaults to the recipe's file stem.");
  s.add_int("micro_batch_size", 1).at_least(1).with_doc("Examples per forward pass.");
  s.add_int("gradient_accumulation_steps", 1).at_least(1).with_doc("Micro-batches per optimizer step.");
  s.add_int("eval_batch_size", std::nullopt).at_least(1).with_doc("Examples per eval forward; micro_batch_size if unset.");
  s.add_float("num_epochs", 1.0).above(0.0).with_doc("Epochs over the training set.");
  s.add_int("max_steps", std::nullopt).at_least(1).with_doc("Optimizer steps; wins over num_epochs.");
  s.add_float("max_grad_norm", 1.0).at_least(0.0).with_doc("Clip the global grad norm to this (0 disables).");
  s.add_enum("precision", {"auto", "bf16", "fp16", "fp32"}, "auto")
      .with_doc("Compute precision; auto picks bf16 where supported.");
  s.add_bool("gradient_checkpointing", false).with_doc("Recompute activations per layer in backward.");
  s.add_int("seed", 42).at_least(0).with_doc("Seed for init, dropout, shuffling.");
  s.add_int("logging_steps", 10).at_least(1).with_doc("Log every N optimizer steps.");
  s.add_int("eval_steps", std::nullopt).at_least(1).with_doc("Evaluate every N steps.");
  s.add_int("evals_per_epoch", std::nullopt).at_least(1).with_doc("Evaluations per epoch.");
  s.add_int("save_steps", std::nullopt).at_least(1).with_doc("Checkpoint every N steps.");
  s.add_int("saves_per_epoch", std::nullopt).at_least(1).with_doc("Checkpoints per epoch.");
  s.add_int("save_total_limit", std::nullopt).at_least(1).with_doc("Keep at most this many checkpoints.");
  s.add_enum("metric_for_best", {"eval_loss", "eval_perplexity", "eval_exact_match", "loss", "perplexity", "exact_match"},
             std::nullopt)
      .with_doc("Eval metric that decides which checkpoints to keep (exact_match needs eval_generation_samples).");
  s.add_string("resume_from_checkpoint", std::nullopt).with_doc("\"auto\" or a checkpoint folder.");
  s.add_int("early_stopping_patience", std::nullopt).at_least(1).with_doc("Evals without improvement before stopping.");
  s.add_float("neftune_noise_alpha", std::nullopt).above(0.0).with_doc("NEFTune embedding noise.");
  s.add_float("loss_watchdog_threshold", std::nullopt).above(0.0).with_doc("Stop when loss stays above this.");
  s.add_int("loss_watchdog_patience", 3).at_least(1).with_doc("Steps above the watchdog threshold before stopping.");
  s.add_bool("eval_before_training", false).with_doc("Evaluate once before the first step (a baseline to compare with).");
  s.add_int("eval_generation_samples", 0).at_least(0)
      .with_doc("Validation examples answered by greedy generation at each eval, scored by exact match (0: off).");
  s.add_int("eval_max_new_tokens", 32).at_least(1).with_doc("Token limit of each generated eval answer.");
  s.add_int("eval_generation_batch_size", 16).at_least(1)
      .with_doc("Eval prompts decoded together (left-padded, one KV cache); the answers do not depend on it.");
  s.add_bool("auto_micro_batch", false)
      .with_doc("On CUDA out of memory, halve micro_batch_size and double gradient_accumulation_steps, then go on.");
  s.add_enum("state_conversion", {"convert", "reset"}, "convert")
      .with_doc("Resuming with another optimizer: convert its state (8-bit <-> 32-bit) or start fresh.");
  s.exclusive({"eval_steps", "evals_per_epoch"});
  s.exclusive({"save_steps", "saves_per_epoch"});
  return s;
}

// Calibration rows for quantizers that need activations (GPTQ): drawn
// from the training examples' tokens, concatenated and cut into rows.
sdk::ParamSpec calibration_spec() {
  sdk::ParamSpec s;
  s.add_int("samples", 128).at_least(1).with_doc("Calibration rows (GPTQ's nsamples).");
  s.add_int("sequence_len", 512).at_least(1).with_doc("Tokens per calibration row.");
  s.add_int("seed", 0).at_least(0).with_doc("Seed for drawing the rows from the training data.");
  return s;
}

// Multi-process training (core/src/dist): read only under torchrun.
sdk::ParamSpec distributed_spec() {
  sdk::ParamSpec s;
  s.add_enum("backend", {"auto", "gloo", "nccl"}, "auto")
      .with_doc("c10d backend: auto picks nccl for CUDA, gloo for the CPU.");
  s.add_float("timeout_s", 600.0).above(0.0)
      .with_doc("A collective waiting longer than this fails, naming the rank that was lost.");
  s.add_float("bucket_mb", 25.0).above(0.0)
      .with_doc("Gradient all-reduce bucket size (MiB); buckets overlap the backward.");
  s.add_bool("shard_optimizer_state", false)
      .with_doc("ZeRO-1: each rank keeps the optimizer state of its share of the tensors.");
  return s;
}

sdk::ParamSpec plugins_spec() {
  sdk::ParamSpec s;
  s.add_string_list("paths", {}).with_doc("Extra plugin folders, searched first (relative to the recipe).");
  return s;
}

}  // namespace

const std::vector<std::string>& core_section_names() {
  static const std::vector<std::string> names = {"model", "data", "train", "calibration", "distributed", "plugins"};
  return names;
}

std::shared_ptr<const sdk::ParamSpec> core_section_spec(const std::string& section) {
  static const auto model = std::make_shared<const sdk::ParamSpec>(model_spec());
  static const auto data = std::make_shared<const sdk::ParamSpec>(data_spec());
  static const auto train = std::make_shared<const sdk::ParamSpec>(train_spec());
  static const auto plugins = std::make_shared<const sdk::ParamSpec>(plugins_spec());
  static const auto calibration = std::make_shared<const sdk::ParamSpec>(calibration_spec());
  static const auto distributed = std::make_shared<const sdk::ParamSpec>(distributed_spec());
  if (section == "model") return model;
  if (section == "data") return data;
  if (section == "train") return train;
  if (section == "plugins") return plugins;
  if (section == "calibration") return calibration;
  if (section == "distributed") return distributed;
  throw std::invalid_argument("not a core recipe section: " + section);
}

}  // namespace ftcore

// Checkpoints of a run (docs/architecture.md, "Training"):
//
//   <run>/checkpoint-<step>/
//     adapter_model.safetensors + adapter_config.json   (PEFT format), or
//     model.safetensors + config.json                   (full fine-tune, HF names)
//     optimizer.safetensors   optimizer state by parameter name (sdk/optimizer.h)
//     rng_state.safetensors   the CPU generator's state (tensor "cpu", uint8)
//     trainer_state.json      step, epoch, sampler cursor, scheduler position,
//                             best metric, counters, log history; written last
//
// Checkpoints from before rng_state.safetensors hold the RNG state as base64
// text in trainer_state.json ("rng": {"cpu": ...}) and still resume.
//
// A checkpoint is written into checkpoint-<step>.tmp, every file flushed to
// disk, then renamed into place: a kill at any moment leaves the previous
// checkpoints intact and never a folder that looks complete but is not.
// Leftover .tmp folders are removed when a run starts or resumes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "ftcore/atomic_file.h"
#include "ftcore/sdk/tensor_map.h"

namespace ftcore::train {

inline constexpr int kTrainerStateVersion = 1;

struct TrainerState {
  int64_t global_step = 0;     // optimizer steps completed
  int64_t total_steps = 0;
  double epoch = 0.0;          // fractional epochs completed
  int64_t cursor_epoch = 0;    // where the next step's micro-batches start
  int64_t cursor_batch = 0;
  std::string scheduler;       // scheduler name; its position is global_step of total_steps
  double learning_rate = 0.0;  // the last step's base lr (after scheduler and adapter multiplier)
  at::Tensor cpu_rng_state;    // the default CPU generator's state (uint8)
  std::optional<double> best_metric;
  std::string best_checkpoint;  // folder name, e.g. "checkpoint-40"
  int64_t evals_without_improvement = 0;
  int64_t watchdog_strikes = 0;  // consecutive steps with loss above the watchdog threshold
  double loss_scale = 1.0;
  int64_t loss_scale_clean_steps = 0;
  int64_t micro_batch_splits = 1;  // auto_micro_batch: each sampler batch split in this many
  double window_loss = 0.0;        // losses summed since the last log line, and their count
  int64_t window_steps = 0;
  int64_t window_tokens = 0;
  std::string recipe_sha256;       // of recipe.lock.toml's settings, to warn when a resume changes them
  nlohmann::json log_history = nlohmann::json::array();

  nlohmann::json to_json() const;
  // Throws std::runtime_error naming the file and the field. cpu_rng_state
  // is set only from an old checkpoint's base64 "rng" field; read_checkpoint
  // reads rng_state.safetensors.
  static TrainerState from_json(const nlohmann::json& j, const std::string& origin);
};

struct CheckpointContents {
  std::string weights_file;  // "adapter_model.safetensors" or "model.safetensors"
  sdk::TensorMap weights;
  std::vector<std::pair<std::string, std::string>> text_files;  // file name -> contents
  sdk::TensorMap optimizer_state;
  TrainerState state;
};

std::string checkpoint_name(int64_t step);  // "checkpoint-<step>"

// Writes atomically; returns the checkpoint folder.
std::filesystem::path write_checkpoint(const std::filesystem::path& run_dir, const CheckpointContents& contents);

struct LoadedCheckpoint {
  std::filesystem::path dir;
  TrainerState state;
  sdk::TensorMap weights;
  sdk::TensorMap optimizer_state;
};

// Reads and checks a checkpoint folder; throws std::runtime_error naming the file.
LoadedCheckpoint read_checkpoint(const std::filesystem::path& dir, const std::string& weights_file);

// The complete checkpoint with the highest step in `run_dir`, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// Deletes the oldest checkpoints beyond `limit`, never `keep` (the best one)
// nor the newest.
void rotate_checkpoints(const std::filesystem::path& run_dir, int64_t limit, const std::string& keep);

// Removes checkpoint-*.tmp folders left by a killed run.
void remove_partial_checkpoints(const std::filesystem::path& run_dir);

// Writes a whole file through <path>.tmp, fsync and rename (ftcore/atomic_file.h);
// also reachable as train::write_file_atomically for the trainer's callers.
using ftcore::write_file_atomically;

}  // namespace ftcore::train

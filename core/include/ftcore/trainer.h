// `ftcore run`: a validated recipe -> a trained model in a run folder
// (docs/architecture.md, "Training"). Loads the model, tokenizer and data, builds
// every component the recipe names, trains, evaluates, checkpoints, and
// writes the final adapter (PEFT format) or model (HF format).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ftcore/recipe.h"
#include "ftcore/registry.h"

namespace ftcore {

// One evaluation's metrics, and the optimizer steps done when it ran (0: before training).
struct EvalRecord {
  int64_t step = 0;
  std::vector<std::pair<std::string, double>> values;
};

struct TrainingOutcome {
  enum class Status {
    Completed,     // every step ran (or early stopping ended it)
    Interrupted,   // SIGINT/SIGTERM: step finished, checkpoint saved
    Stopped,       // NaN/Inf loss or the loss watchdog: checkpoint saved
  };
  Status status = Status::Completed;
  int signal = 0;  // with Interrupted
  std::string message;
  std::filesystem::path run_dir;
  // The first and the last evaluation of this process (none without validation data).
  std::optional<EvalRecord> first_eval, last_eval;
};

// What the command line adds to a recipe.
struct TrainingRequest {
  // `ftcore run --overwrite`: a run folder holding a previous run (checkpoints,
  // final weights, metrics) is started afresh instead of refused.
  bool overwrite = false;
};

// Throws ConfigError for settings that only make sense together with the
// data or the model, or a run folder that is in use or holds a previous run
// (exit 2), std::runtime_error for everything else.
TrainingOutcome run_training(const Recipe& recipe, const PluginRegistry& registry, const TrainingRequest& request = {});

}  // namespace ftcore

// The optimizer step harness: drives an optimizer plugin on tensors given in
// a safetensors file, outside training, so a reference script can compare
// its updates with torch.optim (or another library) on exactly the same
// inputs, and `ftcore plugin verify` can replay steps in a fresh process.
// `ftcore plugin steps` is its command line (plugin_command.cpp).
//
// INPUTS holds "param.<name>" (initial values), "grad.<step>.<name>" (the
// gradient of optimizer step <step>, 0-based; absent: no gradient that step)
// and metadata "groups": a JSON list of {"name", "params": [...],
// "lr_scale"?, "weight_decay"?}. OUT receives the final "param.<name>".
// RESUME loads parameters and optimizer state written by SAVE_STATE of an
// earlier process ("param.<name>", "state.<key>" and the state's metadata)
// and continues at first_step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ftcore/registry.h"

namespace ftcore::cli {

struct OptimizerStepsJob {
  std::string optimizer;            // registered name, e.g. "adamw"
  std::vector<std::string> sets;    // TOML assignments of its options: "lr = 1e-3"
  std::filesystem::path inputs, out;
  std::filesystem::path resume;      // empty: start from INPUTS' parameters
  std::filesystem::path save_state;  // empty: do not save
  int64_t steps = 0;
  int64_t first_step = 0;
};

// Runs the job; options are validated like a recipe's [optimizer] table
// (ConfigError, exit 2), anything else the optimizer throws propagates.
void run_optimizer_steps(const PluginRegistry& registry, const OptimizerStepsJob& job);

}  // namespace ftcore::cli

// The parts of a run, each built by one function from the recipe and
// returned as a value (run_training.cpp calls them in design order: device,
// data, model, trainable tensors, components). Settings that only fail
// together with the model, data or run folder throw ConfigError naming the
// recipe; a plugin refusing its options (sdk::OptionError) does too.
#pragma once

#include <filesystem>
#include <optional>

#include "ftcore/recipe.h"
#include "ftcore/registry.h"
#include "trainer.h"

namespace ftcore::train {

ConfigError recipe_error(const std::filesystem::path& recipe_path, std::string message);

// `local_rank` picks the GPU of a multi-process run.
c10::Device resolve_device(const std::string& requested, const std::filesystem::path& recipe_path, int local_rank);
void seed_everything(uint64_t seed);
void check_metric_name(const TrainOptions& t, const std::filesystem::path& recipe_path);
// The checkpoint to resume from; `restarted` (torchrun restarted the group)
// makes an unset resume_from_checkpoint mean "auto". Without a resume, a run
// folder holding a previous run is refused unless `overwrite`.
std::optional<std::filesystem::path> resolve_resume(const TrainOptions& t, const std::filesystem::path& recipe_path,
                                                    bool restarted, bool overwrite);

// The base model: a quantized folder through its quantizer, or a dense
// folder, quantized here when the recipe has a [quantizer] (QLoRA).
BaseModel load_base_model(const Recipe& recipe, const PluginRegistry& registry, const PreparedData& data,
                          c10::Device device, const TrainOptions& t);
// The adapter's tensors (base frozen), or every weight for a full fine-tune.
TrainableSet select_trainable(const Recipe& recipe, const PluginRegistry& registry, Model& model);
// Under bf16/fp16 autocast, when the adapter declares it never reads the base
// again (sdk::BaseWeightUse), keeps the frozen dense Linear weights in the
// autocast dtype only: the same products, without their fp32 copies.
// FTCORE_FROZEN_WEIGHTS=fp32 keeps them (for A/B and memory comparisons).
void keep_frozen_weights_in_compute_dtype(Model& model, const TrainableSet& trainable, const Precision& precision);
// Sampler, optimizer (over `optimizer_groups`), scheduler and (with
// `with_loggers`) loggers. The sampler yields global micro-batches of
// micro_batch_size x world_size rows.
Components build_components(const Recipe& recipe, const PluginRegistry& registry, const PreparedData& data,
                            const std::vector<sdk::ParamGroupSpec>& optimizer_groups, int world_size,
                            bool with_loggers);
CollateOptions collate_options(const Recipe& recipe, const Tokenizer& tokenizer);
GenerationEvalOptions generation_eval_options(const Recipe& recipe, const TrainOptions& t, const Model& model,
                                              const Tokenizer& tokenizer);

}  // namespace ftcore::train

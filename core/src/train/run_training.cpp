// run_training(): builds everything a recipe names, in order (device ->
// process group -> data -> model -> trainable tensors -> components), prepares
// the run folder (recipe.lock.toml, resume), and hands the setup to the Trainer.
//
// Under torchrun (WORLD_SIZE > 1) every rank builds the same model and data;
// rank 0 tokenizes first (the others then read its cache), owns the run
// folder and the loggers; with [distributed] shard_optimizer_state each
// rank's optimizer holds only its share of the tensors (dist/optimizer_sharding.h).
#include <algorithm>

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include "../dist/launch_environment.h"
#include "ftcore/hash.h"
#include "ftcore/model_config.h"
#include "ftcore/trainer.h"
#include "run_folder.h"
#include "run_folder_lock.h"
#include "rng_streams.h"
#include "run_setup.h"
#include "stop_signals.h"
#include "trainer.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

using train::TrainingSetup;

// The process group of a multi-process run; none for one process, and none
// (with a note) for a [distributed] section outside torchrun.
train::Distributed connect_distributed(const Recipe& recipe, const std::optional<dist::LaunchEnvironment>& launch,
                                       c10::Device device) {
  train::Distributed d;
  const dist::DistributedOptions options = dist::DistributedOptions::from_options(recipe.distributed);
  d.bucket_bytes = options.bucket_bytes;
  if (!launch || launch->world_size == 1) {
    const auto& params = recipe.distributed.spec()->params();
    const bool configured = std::any_of(params.begin(), params.end(),
                                        [&](const sdk::Param& p) { return recipe.distributed.is_set_by_user(p.key); });
    if (!launch && configured)
      spdlog::info("[distributed] is ignored: this is one process (start it with torchrun, or ftcore run --nproc-per-node N)");
    return d;
  }
  d.group = dist::ProcessGroup::connect(*launch, options, device);
  spdlog::set_pattern("%^%l%$: [rank " + std::to_string(launch->rank) + "] %v");
  return d;
}

// Rank 0 prepares (and caches) the data first; the other ranks then read the cache.
// A tokenizer that is not the model's yields ids past its embedding, which
// would fail in the first forward as "index out of range in self".
void check_token_ids_fit(const PreparedData& data, const ModelConfig& config, const Recipe& recipe,
                         const fs::path& tokenizer_dir) {
  for (const auto* split : {&data.train, &data.validation})
    for (const Example& e : *split)
      for (const int32_t id : e.input_ids)
        if (id < 0 || id >= config.vocab_size)
          throw train::recipe_error(
              recipe.path, "token id " + std::to_string(id) + " of " + recipe.data.get_string("path") + ":" +
                               std::to_string(e.source_line) + " is outside the model's embedding of " +
                               std::to_string(config.vocab_size) + " rows (vocab_size in its config.json): the tokenizer in " +
                               tokenizer_dir.string() + " does not belong to this model");
}

PreparedData prepare_data_once(const Recipe& recipe, const Tokenizer& tokenizer, const fs::path& tokenizer_file,
                               train::Distributed& d) {
  const DataConfig config = DataConfig::from_options(recipe.data, recipe.model, recipe.train);
  PreparedData data;
  if (d.writes_outputs()) data = prepare_data(config, tokenizer, tokenizer_file);
  if (d.group) d.group->barrier("waiting for rank 0 to prepare the data");
  if (!d.writes_outputs()) data = prepare_data(config, tokenizer, tokenizer_file);
  return data;
}

// Returns the text of recipe.lock.toml, which is written only once the setup
// (a resume included) has succeeded: a run that fails to start leaves the
// folder's lock describing the run that wrote its checkpoints.
std::string prepare_run_folder(const Recipe& recipe, TrainingSetup& s, const fs::path& model_dir) {
  const train::TrainOptions& t = s.options;
  std::string lock = train::lock_file_text(recipe, s.data, model_dir, s.components.sampler_name);
  s.recipe_sha256 = sha256_hex(train::lock_settings(lock));
  if (!s.distributed.writes_outputs()) return lock;
  fs::create_directories(t.run_dir);
  s.components.optimizer->attach_run_folder(t.run_dir.string());
  train::remove_partial_checkpoints(t.run_dir);
  return lock;
}

// After a resume (or none), so the loggers know where the history goes on:
// sdk::kResumedAtStep, see ftcore/sdk/logger.h.
void open_loggers(const Recipe& recipe, TrainingSetup& s, const fs::path& model_dir,
                  std::optional<int64_t> resumed_at_step) {
  const train::TrainOptions& t = s.options;
  int64_t trainable = 0;
  for (const auto& p : s.trainable.tensors) trainable += p.numel();
  sdk::RunInfo run;
  run.run_name = t.run_name;
  run.output_dir = t.run_dir.string();
  run.metadata = {{"recipe", recipe.path.string()}, {"recipe_sha256", s.recipe_sha256},
                  {"model", model_dir.string()}, {"device", s.base.model->device().str()},
                  {"precision", s.precision.name}, {"dataset", s.data.cache_key},
                  {"sampler", s.components.sampler_name}, {"trainable_parameters", std::to_string(trainable)},
                  {"world_size", std::to_string(s.distributed.world_size())}};
  if (resumed_at_step) run.metadata[sdk::kResumedAtStep] = std::to_string(*resumed_at_step);
  for (auto& logger : s.components.loggers) logger->open(run);
}

}  // namespace

TrainingOutcome run_training(const Recipe& recipe, const PluginRegistry& registry, const TrainingRequest& request) {
  train::StopSignals signals;  // from here to the final save (ftcore/stop_request.h)
  TrainingSetup s;
  s.options = train::TrainOptions::from_options(recipe.train, recipe.path);
  const fs::path& recipe_path = recipe.path;
  train::check_metric_name(s.options, recipe_path);
  const std::optional<dist::LaunchEnvironment> launch = dist::read_launch_environment();
  // Before the slow parts: the folder's lock (by the process that writes it), then what it holds.
  std::optional<train::RunFolderLock> folder_lock;
  if (!launch || launch->rank == 0) folder_lock.emplace(s.options.run_dir, recipe_path);
  const std::optional<fs::path> resume =
      train::resolve_resume(s.options, recipe_path, launch && launch->restart_count > 0, request.overwrite);
  if (folder_lock && request.overwrite && !resume) train::remove_previous_run(s.options.run_dir);
  const c10::Device device =
      train::resolve_device(recipe.model.get_string("device"), recipe_path, launch ? launch->local_rank : 0);
  s.precision = train::resolve_precision(s.options.precision, device);
  train::seed_everything(s.options.seed);
  s.distributed = connect_distributed(recipe, launch, device);

  // The data before the model: a calibrating quantizer draws its rows from it.
  const fs::path model_dir = recipe.model.get_string("path");
  if (model_dir.extension() == ".gguf")
    throw train::recipe_error(recipe_path, "model.path = \"" + model_dir.string() +
                                               "\": training reads HF folders; convert the GGUF first with `ftcore convert`");
  const fs::path tokenizer_dir =
      recipe.model.has_value("tokenizer_path") ? fs::path(recipe.model.get_string("tokenizer_path")) : model_dir;
  s.tokenizer = Tokenizer::from_folder(tokenizer_dir);
  s.data = prepare_data_once(recipe, *s.tokenizer, tokenizer_dir / "tokenizer.json", s.distributed);
  check_token_ids_fit(s.data, read_model_config(model_dir), recipe, tokenizer_dir);
  s.base = train::load_base_model(recipe, registry, s.data, device, s.options);
  s.trainable = train::select_trainable(recipe, registry, *s.base.model);
  train::keep_frozen_weights_in_compute_dtype(*s.base.model, s.trainable, s.precision);
  s.collate = train::collate_options(recipe, *s.tokenizer);
  s.generation_eval = train::generation_eval_options(recipe, s.options, *s.base.model, *s.tokenizer);

  std::vector<sdk::ParamGroupSpec> optimizer_groups = s.trainable.groups;
  if (s.distributed.group && recipe.distributed.get_bool("shard_optimizer_state")) {
    try {
      s.distributed.sharding = std::make_unique<dist::OptimizerSharding>(*s.distributed.group, s.trainable.groups);
    } catch (const std::invalid_argument& e) {
      throw train::recipe_error(recipe_path, e.what());
    }
    optimizer_groups = s.distributed.sharding->owned_groups();
    spdlog::info("ZeRO-1: this rank steps {} of {} trainable elements", s.distributed.sharding->owned_elements(),
                 s.distributed.sharding->total_elements());
  }
  s.components = train::build_components(recipe, registry, s.data, optimizer_groups, s.distributed.world_size(),
                                         s.distributed.writes_outputs());
  const std::string lock = prepare_run_folder(recipe, s, model_dir);
  spdlog::info("run folder {} ({} train / {} validation examples, precision {}, device {}, {} rank{})",
               s.options.run_dir.string(), s.data.train.size(), s.data.validation.size(), s.precision.name,
               device.str(), s.distributed.world_size(), s.distributed.world_size() > 1 ? "s" : "");

  train::seed_everything(train::stream_seed(s.options.seed, "dropout"));  // rng_streams.h
  train::Trainer trainer(s);
  if (resume) trainer.resume_from(*resume);
  if (s.distributed.writes_outputs()) {
    train::write_file_atomically(s.options.run_dir / "recipe.lock.toml", lock);
    open_loggers(recipe, s, model_dir, resume ? std::optional<int64_t>(trainer.global_step()) : std::nullopt);
  }
  TrainingOutcome outcome = trainer.run();
  for (auto& logger : s.components.loggers) logger->close();
  return outcome;
}

}  // namespace ftcore

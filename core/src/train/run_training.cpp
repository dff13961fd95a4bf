// run_training(): builds everything a recipe names, in design.md section 7's
// order (model -> adapter -> data -> sampler -> optimizer, scheduler,
// loggers), prepares the run folder (recipe.lock.toml, resume), and hands the
// setup to the Trainer.
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include "ftcore/hash.h"
#include "ftcore/model_config.h"
#include "ftcore/param_groups.h"
#include "ftcore/quantized_model.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/trainer.h"
#include "run_folder.h"
#include "trainer.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

using train::TrainingSetup;

// Settings that only fail together with the model, data or run folder; the
// message names the key (the recipe file is the location).
ConfigError config_error(const fs::path& recipe_path, std::string message) {
  return ConfigError({{{recipe_path.string(), 0, 0}, std::move(message)}});
}

c10::Device resolve_device(const std::string& requested, const fs::path& recipe_path) {
  if (requested == "cpu") return c10::kCPU;
  const bool cuda = load_cuda_runtime() && version_info().cuda_device;
  if (requested == "cuda" && !cuda)
    throw config_error(recipe_path, "model.device = \"cuda\" but no CUDA device is usable here (use \"auto\" or \"cpu\")");
  return cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
}

void seed_everything(uint64_t seed) {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(seed);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_metric_name(const train::TrainOptions& t, const fs::path& recipe_path) {
  if (!t.metric_for_best) return;
  const std::string m = t.metric_for_best->rfind("eval_", 0) == 0 ? t.metric_for_best->substr(5) : *t.metric_for_best;
  if (m != "loss" && m != "perplexity" && m != "exact_match")
    throw config_error(recipe_path, "train.metric_for_best = \"" + *t.metric_for_best +
                                 "\": expected eval_loss, eval_perplexity or eval_exact_match");
  if (m == "exact_match" && t.eval_generation_samples == 0)
    throw config_error(recipe_path, "train.metric_for_best = \"" + *t.metric_for_best +
                                 "\" needs train.eval_generation_samples > 0");
}

std::optional<fs::path> resolve_resume(const train::TrainOptions& t, const fs::path& recipe_path) {
  if (!t.resume_from_checkpoint) {
    if (train::latest_checkpoint(t.run_dir))
      throw config_error(recipe_path, "the run folder " + t.run_dir.string() +
                                   " already holds checkpoints: set train.resume_from_checkpoint = \"auto\" to go on, "
                                   "or pick another train.run_name");
    return std::nullopt;
  }
  if (*t.resume_from_checkpoint == "auto") {
    auto latest = train::latest_checkpoint(t.run_dir);
    if (!latest) spdlog::info("resume_from_checkpoint = \"auto\": no checkpoint in {} yet; starting fresh", t.run_dir.string());
    return latest;
  }
  fs::path dir = *t.resume_from_checkpoint;
  if (!fs::exists(dir / "trainer_state.json"))
    throw config_error(recipe_path, "train.resume_from_checkpoint = \"" + dir.string() +
                                 "\": not a complete checkpoint folder (no trainer_state.json)");
  return dir;
}


// The base model: a quantized folder through its quantizer, or a dense
// folder, quantized here when the recipe has a [quantizer] (QLoRA); the
// quantized weights are frozen, so a [quantizer] needs an [adapter].
void load_base_model(const Recipe& recipe, const PluginRegistry& registry, const fs::path& model_dir,
                     const LoadOptions& load, TrainingSetup& s) {
  if (is_quantized_folder(model_dir)) {
    QuantizedModel q = load_quantized_model(model_dir, load, registry);
    if (recipe.quantizer && recipe.quantizer->name() != q.quantizer_name)
      throw config_error(recipe.path, "[quantizer] name = \"" + recipe.quantizer->name() + "\", but " +
                                          model_dir.string() + " is already quantized with " + q.quantizer_name);
    s.quantizer = q.quantizer;
    s.model = q.model;
  } else {
    s.model = Model::from_pretrained(model_dir, load);
    if (!recipe.quantizer) return;
    try {
      s.quantizer = registry.create_quantizer(*recipe.quantizer->entry, recipe.quantizer->options);
    } catch (const std::exception& e) {  // the plugin refused an option value
      throw config_error(recipe.path, e.what());
    }
    std::vector<at::Tensor> calibration;
    if (s.quantizer->needs_calibration()) {
      std::vector<std::vector<int64_t>> rows;
      for (const auto& e : s.data.train) rows.emplace_back(e.input_ids.begin(), e.input_ids.end());
      const sdk::Options& c = recipe.calibration;
      calibration = calibration_rows(rows, c.get_int("samples"), c.get_int("sequence_len"),
                                     static_cast<uint64_t>(c.get_int("seed")));
    }
    quantize_model(*s.model, s.quantizer, calibration);
  }
  if (!recipe.adapter)
    throw config_error(recipe.path, "a quantized base is frozen: training it needs an [adapter] (QLoRA)");
  const QuantizationSummary q = summarize_quantization(*s.model);
  spdlog::info("quantized base: {} Linear slots in {}, {:.1f} MB, {:.3f} bytes per quantized weight", q.slots,
               q.format, static_cast<double>(q.bytes) / 1e6, q.bytes_per_parameter());
}

}  // namespace

TrainingOutcome run_training(const Recipe& recipe, const PluginRegistry& registry) {
  TrainingSetup s;
  s.options = train::TrainOptions::from_options(recipe.train, recipe.path);
  const fs::path& recipe_path = recipe.path;
  check_metric_name(s.options, recipe_path);
  const train::TrainOptions& t = s.options;
  const std::optional<fs::path> resume = resolve_resume(t, recipe_path);  // before the slow parts
  const c10::Device device = resolve_device(recipe.model.get_string("device"), recipe_path);
  s.precision = train::resolve_precision(t.precision, device);
  seed_everything(t.seed);

  // The model folder, then the data (before the model: a calibrating
  // quantizer draws its rows from the training examples).
  const fs::path model_dir = recipe.model.get_string("path");
  if (model_dir.extension() == ".gguf")
    throw config_error(recipe_path, "model.path = \"" + model_dir.string() +
                                 "\": training reads HF folders; convert the GGUF first with `ftcore convert`");
  const fs::path tokenizer_dir =
      recipe.model.has_value("tokenizer_path") ? fs::path(recipe.model.get_string("tokenizer_path")) : model_dir;
  s.tokenizer = Tokenizer::from_folder(tokenizer_dir);
  DataConfig data_config = DataConfig::from_options(recipe.data, recipe.model, recipe.train);
  s.data = prepare_data(data_config, *s.tokenizer, tokenizer_dir / "tokenizer.json");

  // Model.
  LoadOptions load;
  load.device = device;
  if (recipe.model.get_string("dtype") != "auto") load.dtype = parse_dtype_name(recipe.model.get_string("dtype"));
  load_base_model(recipe, registry, model_dir, load, s);
  s.model_config_json = read_text(model_dir / "config.json");
  s.model_dir = fs::absolute(model_dir).lexically_normal().string();
  s.model->set_gradient_checkpointing(t.gradient_checkpointing);
  s.model->set_neftune_noise_alpha(t.neftune_noise_alpha);

  // Trainable parameters: the adapter's, or every weight for a full fine-tune.
  std::vector<sdk::ParamGroupSpec> groups;
  if (recipe.adapter) {
    for (const auto& p : s.model->named_parameters()) p.tensor.requires_grad_(false);
    s.adapter = registry.create_adapter(*recipe.adapter->entry, recipe.adapter->options);
    try {
      groups = s.adapter->apply(*s.model);
    } catch (const std::invalid_argument& e) {  // the recipe asks for what this model cannot do
      throw config_error(recipe_path, e.what());
    }
    const std::string initial = s.adapter->initial_weights_dir();
    if (!initial.empty()) {
      const fs::path file = fs::path(initial) / "adapter_model.safetensors";
      s.adapter->load(safetensors::File::open(file)->read_all());
      spdlog::info("adapter weights from {}", file.string());
    }
  } else {
    sdk::ParamGroupSpec all;
    all.name = "model";
    for (const auto& p : s.model->named_parameters()) {
      p.tensor.requires_grad_(true);
      all.params.push_back(p);
    }
    groups.push_back(std::move(all));
  }
  groups = split_no_decay(std::move(groups));
  int64_t trainable_count = 0, total_count = 0;
  for (const auto& g : groups)
    for (const auto& p : g.params) s.trainable.push_back(p.tensor), trainable_count += p.tensor.numel();
  for (const auto& p : s.model->named_parameters()) total_count += p.tensor.numel();
  spdlog::info("trainable parameters: {} of {} ({:.3f}%)", trainable_count, total_count,
               100.0 * static_cast<double>(trainable_count) / static_cast<double>(std::max<int64_t>(total_count, 1)));

  const bool packing = recipe.data.get_bool("sample_packing");
  s.collate.sequence_len = data_config.sequence_len;
  s.collate.pad_to_sequence_len = recipe.data.get_bool("pad_to_sequence_len");
  s.collate.pad_left = recipe.data.get_string("padding_side") == "left";
  s.collate.pad_id = s.tokenizer->pad_id().value_or(s.tokenizer->eos_id().value_or(0));
  const GenerationConfig generation = read_generation_config(model_dir, s.model->config());
  s.generation_eval.samples = t.eval_generation_samples;
  s.generation_eval.max_new_tokens = t.eval_max_new_tokens;
  s.generation_eval.stop_token_ids = generation.eos_token_ids;
  if (auto eos = s.tokenizer->eos_id()) s.generation_eval.stop_token_ids.push_back(*eos);

  // Sampler, optimizer, scheduler, loggers.
  const std::string sampler_name = recipe.sampler ? recipe.sampler->name() : (packing ? "multipack" : "random");
  if (recipe.sampler) {
    s.sampler = registry.create_sampler(*recipe.sampler->entry, recipe.sampler->options);
  } else {
    const RegistryEntry* entry = registry.find(sdk::ComponentKind::Sampler, sampler_name);
    if (!entry) throw config_error(recipe_path, "no [sampler] given and the default sampler/" + sampler_name + " is not installed");
    s.sampler = registry.create_sampler(*entry, sdk::Options(entry->params, {}));
  }
  for (const auto& e : s.data.train) s.sampler_input.lengths.push_back(static_cast<int64_t>(e.input_ids.size()));
  s.sampler_input.batch_size = t.micro_batch_size;
  s.sampler_input.sequence_len = data_config.sequence_len;
  s.sampler_input.seed = t.seed;
  try {
    s.optimizer = registry.create_optimizer(*recipe.optimizer.entry, groups, recipe.optimizer.options);
  } catch (const std::exception& e) {  // the plugin refused an option combination
    throw config_error(recipe_path, e.what());
  }
  s.base_lr = recipe.optimizer.options.get_float("lr");
  sdk::SchedulerContext context;
  context.base_lr = s.base_lr;
  s.scheduler = registry.create_scheduler(*recipe.scheduler.entry, recipe.scheduler.options, context);
  s.scheduler_name = recipe.scheduler.name();
  for (const auto& l : recipe.loggers) s.loggers.push_back(registry.create_logger(*l.entry, l.options));

  // Run folder.
  fs::create_directories(t.run_dir);
  s.optimizer->attach_run_folder(t.run_dir.string());
  train::remove_partial_checkpoints(t.run_dir);
  const std::string lock = train::lock_file_text(recipe, s.data, model_dir, sampler_name);
  s.recipe_sha256 = sha256_hex(train::lock_settings(lock));
  train::write_file_atomically(t.run_dir / "recipe.lock.toml", lock);
  sdk::RunInfo run;
  run.run_name = t.run_name;
  run.output_dir = t.run_dir.string();
  run.metadata = {{"recipe", recipe.path.string()}, {"recipe_sha256", s.recipe_sha256},
                  {"model", model_dir.string()}, {"device", device.str()}, {"precision", s.precision.name},
                  {"dataset", s.data.cache_key}, {"sampler", sampler_name},
                  {"trainable_parameters", std::to_string(trainable_count)}};
  for (auto& logger : s.loggers) logger->open(run);
  spdlog::info("run folder {} ({} train / {} validation examples, precision {}, device {})", t.run_dir.string(),
               s.data.train.size(), s.data.validation.size(), s.precision.name, device.str());

  train::Trainer trainer(s);
  TrainingOutcome outcome = trainer.run(resume);
  for (auto& logger : s.loggers) logger->close();
  return outcome;
}

}  // namespace ftcore

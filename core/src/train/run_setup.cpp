// The parts of a run, built from the recipe (run_setup.h).
#include "run_setup.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ftcore/model_config.h"
#include "ftcore/param_groups.h"
#include "ftcore/quantized_model.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/adapter.h"
#include "ftcore/sdk/option_error.h"
#include "run_folder_lock.h"

namespace fs = std::filesystem;

namespace ftcore::train {

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A quantizer that calibrates (GPTQ) draws its rows from the training examples.
std::vector<at::Tensor> calibration_for(const Recipe& recipe, const sdk::Quantizer& quantizer, const PreparedData& data) {
  if (!quantizer.needs_calibration()) return {};
  std::vector<std::vector<int64_t>> rows;
  for (const auto& e : data.train) rows.emplace_back(e.input_ids.begin(), e.input_ids.end());
  const sdk::Options& c = recipe.calibration;
  return calibration_rows(rows, c.get_int("samples"), c.get_int("sequence_len"), static_cast<uint64_t>(c.get_int("seed")));
}

}  // namespace

ConfigError recipe_error(const fs::path& recipe_path, std::string message) {
  return ConfigError({{{recipe_path.string(), 0, 0}, std::move(message)}});
}

c10::Device resolve_device(const std::string& requested, const fs::path& recipe_path, int local_rank) {
  if (requested == "cpu" || (requested == "auto" && !nvidia_device_nodes_present())) return c10::kCPU;
  const bool cuda = load_cuda_runtime() && version_info().cuda_device;
  if (requested == "cuda" && !cuda)
    throw recipe_error(recipe_path, "model.device = \"cuda\" but no CUDA device is usable here (use \"auto\" or \"cpu\")");
  return cuda ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank)) : c10::Device(c10::kCPU);
}

void seed_everything(uint64_t seed) {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_current_seed(seed);
}

// The metric's name is checked by its ParamSpec; this is the cross-key rule.
void check_metric_name(const TrainOptions& t, const fs::path& recipe_path) {
  if (!t.metric_for_best) return;
  const bool exact_match = t.metric_for_best->find("exact_match") != std::string::npos;
  if (exact_match && t.eval_generation_samples == 0)
    throw recipe_error(recipe_path, "train.metric_for_best = \"" + *t.metric_for_best +
                                        "\" needs train.eval_generation_samples > 0");
}

std::optional<fs::path> resolve_resume(const TrainOptions& t, const fs::path& recipe_path, bool restarted,
                                       bool overwrite) {
  const std::optional<std::string> asked = restarted ? t.resume_from_checkpoint.value_or("auto") : t.resume_from_checkpoint;
  if (!asked) {
    if (overwrite) return std::nullopt;  // the previous run is removed once the folder is locked
    if (latest_checkpoint(t.run_dir))
      throw recipe_error(recipe_path, "the run folder " + t.run_dir.string() +
                                          " already holds checkpoints: set train.resume_from_checkpoint = \"auto\" to "
                                          "go on, pass --overwrite to start again, or pick another train.run_name");
    const std::string previous = previous_run_output(t.run_dir);
    if (!previous.empty())
      throw recipe_error(recipe_path, "the run folder " + t.run_dir.string() + " holds a previous run (" + previous +
                                          "): pass --overwrite to replace it, or pick another train.run_name");
    return std::nullopt;
  }
  if (*asked == "auto") {
    auto latest = latest_checkpoint(t.run_dir);
    if (!latest) spdlog::info("resume_from_checkpoint = \"auto\": no checkpoint in {} yet; starting fresh", t.run_dir.string());
    return latest;
  }
  fs::path dir = *asked;
  if (!fs::exists(dir / "trainer_state.json"))
    throw recipe_error(recipe_path, "train.resume_from_checkpoint = \"" + dir.string() +
                                        "\": not a complete checkpoint folder (no trainer_state.json)");
  return dir;
}

BaseModel load_base_model(const Recipe& recipe, const PluginRegistry& registry, const PreparedData& data,
                          c10::Device device, const TrainOptions& t) {
  const fs::path model_dir = recipe.model.get_string("path");
  LoadOptions load;
  load.device = device;
  if (recipe.model.get_string("dtype") != "auto") load.dtype = parse_dtype_name(recipe.model.get_string("dtype"));
  BaseModel b;
  if (is_quantized_folder(model_dir)) {
    QuantizedModel q = load_quantized_model(model_dir, load, registry);
    if (recipe.quantizer && recipe.quantizer->name() != q.quantizer_name)
      throw recipe_error(recipe.path, "[quantizer] name = \"" + recipe.quantizer->name() + "\", but " +
                                          model_dir.string() + " is already quantized with " + q.quantizer_name);
    b.quantizer = q.quantizer;
    b.model = q.model;
  } else {
    b.model = Model::from_pretrained(model_dir, load);
    if (recipe.quantizer) {
      try {
        b.quantizer = registry.create_quantizer(*recipe.quantizer->entry, recipe.quantizer->options);
      } catch (const sdk::OptionError& e) {
        throw recipe_error(recipe.path, e.what());
      }
      quantize_model(*b.model, b.quantizer, calibration_for(recipe, *b.quantizer, data));
    }
  }
  if (b.quantizer) {
    if (!recipe.adapter)
      throw recipe_error(recipe.path, "a quantized base is frozen: training it needs an [adapter] (QLoRA)");
    const QuantizationSummary q = summarize_quantization(*b.model);
    spdlog::info("quantized base: {} Linear slots in {}, {:.1f} MB, {:.3f} bytes per quantized weight", q.slots,
                 q.format, static_cast<double>(q.bytes) / 1e6, q.bytes_per_parameter());
  }
  b.config_json = read_text(model_dir / "config.json");
  b.dir = fs::absolute(model_dir).lexically_normal().string();
  b.model->set_gradient_checkpointing(t.gradient_checkpointing);
  b.model->set_neftune_noise_alpha(t.neftune_noise_alpha);
  return b;
}

TrainableSet select_trainable(const Recipe& recipe, const PluginRegistry& registry, Model& model) {
  TrainableSet out;
  std::vector<sdk::ParamGroupSpec> groups;
  if (recipe.adapter) {
    for (const auto& p : model.named_parameters()) p.tensor.requires_grad_(false);
    out.adapter = registry.create_adapter(*recipe.adapter->entry, recipe.adapter->options);
    try {
      groups = out.adapter->apply(model);
    } catch (const std::invalid_argument& e) {  // the recipe asks for what this model cannot do
      throw recipe_error(recipe.path, e.what());
    }
    const std::string initial = out.adapter->initial_weights_dir();
    if (!initial.empty()) {
      const fs::path file = fs::path(initial) / "adapter_model.safetensors";
      out.adapter->load(safetensors::File::open(file)->read_all());
      spdlog::info("adapter weights from {}", file.string());
    }
  } else {
    sdk::ParamGroupSpec all;
    all.name = "model";
    for (const auto& p : model.named_parameters()) {
      p.tensor.requires_grad_(true);
      all.params.push_back(p);
    }
    groups.push_back(std::move(all));
  }
  out.groups = split_no_decay(std::move(groups));
  int64_t trainable = 0, total = 0;
  for (const auto& g : out.groups)
    for (const auto& p : g.params) out.tensors.push_back(p.tensor), trainable += p.tensor.numel();
  for (const auto& p : model.named_parameters()) total += p.tensor.numel();
  spdlog::info("trainable parameters: {} of {} ({:.3f}%)", trainable, total,
               100.0 * static_cast<double>(trainable) / static_cast<double>(std::max<int64_t>(total, 1)));
  return out;
}

void keep_frozen_weights_in_compute_dtype(Model& model, const TrainableSet& trainable, const Precision& precision) {
  if (!precision.autocast || !trainable.adapter) return;
  if (sdk::uses_base_weights_after_apply(*trainable.adapter)) {
    spdlog::info("frozen weights stay in fp32: the adapter reads the base weights after applying");
    return;
  }
  if (const char* forced = std::getenv("FTCORE_FROZEN_WEIGHTS"); forced && std::string(forced) == "fp32") {
    spdlog::info("frozen weights stay in fp32 (FTCORE_FROZEN_WEIGHTS=fp32)");
    return;
  }
  const int64_t freed = model.keep_frozen_linear_weights_in(precision.dtype);
  if (freed > 0)
    spdlog::info("frozen Linear weights kept in {} only ({:.1f} MB of fp32 weights dropped)", precision.name,
                 static_cast<double>(freed) / 1e6);
}

Components build_components(const Recipe& recipe, const PluginRegistry& registry, const PreparedData& data,
                            const std::vector<sdk::ParamGroupSpec>& optimizer_groups, int world_size,
                            bool with_loggers) {
  Components c;
  const bool packing = recipe.data.get_bool("sample_packing");
  c.sampler_name = recipe.sampler ? recipe.sampler->name() : (packing ? "multipack" : "random");
  if (recipe.sampler) {
    c.sampler = registry.create_sampler(*recipe.sampler->entry, recipe.sampler->options);
  } else {
    const RegistryEntry* entry = registry.find(sdk::ComponentKind::Sampler, c.sampler_name);
    if (!entry)
      throw recipe_error(recipe.path, "no [sampler] given and the default sampler/" + c.sampler_name + " is not installed");
    c.sampler = registry.create_sampler(*entry, sdk::Options(entry->params, {}));
  }
  for (const auto& e : data.train) c.sampler_input.lengths.push_back(static_cast<int64_t>(e.input_ids.size()));
  c.sampler_input.batch_size = recipe.train.get_int("micro_batch_size") * world_size;
  c.sampler_input.sequence_len = recipe.data.get_int("sequence_len");
  c.sampler_input.seed = static_cast<uint64_t>(recipe.train.get_int("seed"));
  try {
    c.optimizer = registry.create_optimizer(*recipe.optimizer.entry, optimizer_groups, recipe.optimizer.options);
  } catch (const sdk::OptionError& e) {  // the plugin refused an option combination
    throw recipe_error(recipe.path, e.what());
  }
  c.base_lr = recipe.optimizer.options.get_float("lr");
  sdk::SchedulerContext context;
  context.base_lr = c.base_lr;
  c.scheduler = registry.create_scheduler(*recipe.scheduler.entry, recipe.scheduler.options, context);
  c.scheduler_name = recipe.scheduler.name();
  if (with_loggers)
    for (const auto& l : recipe.loggers) c.loggers.push_back(registry.create_logger(*l.entry, l.options));
  return c;
}

CollateOptions collate_options(const Recipe& recipe, const Tokenizer& tokenizer) {
  CollateOptions c;
  c.sequence_len = recipe.data.get_int("sequence_len");
  c.pad_to_sequence_len = recipe.data.get_bool("pad_to_sequence_len");
  c.pad_left = recipe.data.get_string("padding_side") == "left";
  c.pad_id = tokenizer.pad_id().value_or(tokenizer.eos_id().value_or(0));
  return c;
}

GenerationEvalOptions generation_eval_options(const Recipe& recipe, const TrainOptions& t, const Model& model,
                                              const Tokenizer& tokenizer) {
  const GenerationConfig generation = read_generation_config(recipe.model.get_string("path"), model.config());
  GenerationEvalOptions g;
  g.samples = t.eval_generation_samples;
  g.max_new_tokens = t.eval_max_new_tokens;
  g.batch_size = t.eval_generation_batch_size;
  g.stop_token_ids = generation.eos_token_ids;
  if (auto eos = tokenizer.eos_id()) g.stop_token_ids.push_back(*eos);
  return g;
}

}  // namespace ftcore::train

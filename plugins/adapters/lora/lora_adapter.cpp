// adapter/lora (lora_adapter.h): apply, PEFT-format save/load, merge.
//
// Shapes: A [r, in], B [out, r], W [out, in].
#include "lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <ATen/ATen.h>
#include <torch/nn/init.h>

namespace ftcore::plugins::lora {

namespace {

const std::string kPeftPrefix = "base_model.model.";

std::string shape_text(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// The slot's device and compute dtype: its own "weight" when it has a
// floating one (a dense slot), else what it dequantizes to.
std::pair<c10::Device, c10::ScalarType> device_and_dtype_of(const sdk::LinearModule& module) {
  for (const auto& item : module.named_parameters(/*recurse=*/false))
    if (item.key() == "weight" && at::isFloatingType(item.value().scalar_type()))
      return {item.value().device(), item.value().scalar_type()};
  const at::Tensor w = module.dense_weight();
  return {w.device(), w.scalar_type()};
}

// PEFT's LoraLayer.update_layer: nn.Linear(in, r) and nn.Linear(r, out) run
// their own init (Kaiming-uniform, a = sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in))),
// then reset_lora_parameters draws A again (Kaiming-uniform, or normal with
// std 1/r for "gaussian") and zeroes B. Drawn on the CPU in fp32, in this
// order, so one seed gives PEFT's values.
// `rows` is r, or r x E for an expert stack (PEFT's ParamWrapper:
// nn.Linear(in, r*E) and nn.Linear(r*E, out); gaussian keeps std 1/r).
std::pair<at::Tensor, at::Tensor> init_lora_factors(int64_t r, int64_t in, int64_t out, LoraInit init,
                                                    int64_t rows = 0) {
  at::NoGradGuard no_grad;
  if (rows == 0) rows = r;
  at::Tensor a = at::empty({rows, in}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor b = at::empty({out, rows}, at::TensorOptions().dtype(at::kFloat));
  torch::nn::init::kaiming_uniform_(a, std::sqrt(5.0));
  torch::nn::init::kaiming_uniform_(b, std::sqrt(5.0));
  if (init == LoraInit::Gaussian)
    a.normal_(0.0, 1.0 / static_cast<double>(r));
  else
    torch::nn::init::kaiming_uniform_(a, std::sqrt(5.0));
  b.zero_();
  return {a, b};
}

// PEFT's module path for each targeted parameter: its owner module, under one
// "base_layer." per parameter of that owner targeted after it (nested ParamWrappers).
std::vector<std::string> peft_modules_of(const std::vector<ParameterTarget>& targets) {
  auto owner = [](const std::string& path) { return path.substr(0, path.rfind('.')); };
  std::vector<std::string> out;
  for (size_t i = 0; i < targets.size(); ++i) {
    std::string module = owner(targets[i].path);
    for (size_t j = i + 1; j < targets.size(); ++j)
      if (owner(targets[j].path) == owner(targets[i].path)) module += ".base_layer";
    out.push_back(module);
  }
  return out;
}

// Rounds A as PEFT's cast to the base dtype and back to fp32 leaves it (autocast_adapter_dtype).
at::Tensor round_to_base_dtype(const at::Tensor& a, c10::ScalarType dtype) {
  return dtype == at::kBFloat16 || dtype == at::kHalf ? a.to(dtype).to(at::kFloat) : a;
}

}  // namespace

LoraAdapter::LoraAdapter(LoraOptions options) : options_(std::move(options)) {
  if (options_.fan_in_fan_out) {
    // PEFT (lora/model.py, dispatch_default) does the same for nn.Linear.
    TORCH_WARN("adapter/lora: fan_in_fan_out = true is for bases storing W as [in, out] (GPT-2 Conv1D); "
               "every slot here is a Linear [out, in], so it is set to false, as PEFT does");
    options_.fan_in_fan_out = false;
  }
  if (!options_.lora_model_dir.empty()) {
    namespace fs = std::filesystem;
    const fs::path dir(options_.lora_model_dir);
    if (!fs::is_directory(dir))
      throw std::invalid_argument("lora_model_dir: " + dir.string() + " is not a folder");
    if (!fs::exists(dir / "adapter_model.safetensors"))
      throw std::invalid_argument("lora_model_dir: " + dir.string() +
                                  " has no adapter_model.safetensors (a PEFT adapter folder has it and "
                                  "adapter_config.json)");
    if (fs::exists(dir / "adapter_config.json"))
      options_.gate_up_at_double_rank = check_peft_config_compatible((dir / "adapter_config.json").string(), options_);
  }
}

void LoraAdapter::check_state(const char* what) const {
  if (!applied_) throw std::logic_error(std::string("adapter/lora: ") + what + " before apply()");
  if (merged_) throw std::logic_error(std::string("adapter/lora: ") + what + " after merge(): the adapter is folded in");
}

std::vector<sdk::ParamGroupSpec> LoraAdapter::apply(sdk::ModelView& model) {
  if (applied_) throw std::logic_error("adapter/lora: apply() was already called");
  const std::vector<std::string> paths = model.linear_paths();
  const std::vector<sdk::NamedParameter> params = model.named_parameters();
  std::vector<std::string> param_names;
  for (const auto& p : params) param_names.push_back(p.name);

  const std::vector<std::string> parameter_paths = model.adaptable_parameter_paths();
  targets_ = select_lora_targets(peft_addressable_slots(model.architecture(), paths, options_), model.num_layers(),
                                 options_);
  const std::vector<ParameterTarget> parameter_targets = select_parameter_targets(parameter_paths, options_);
  if (!parameter_targets.empty()) check_parameter_lora_options(options_);
  moe_all_linear_ = options_.all_linear() && !parameter_paths.empty();
  const SaveTargets save = select_modules_to_save(paths, param_names, options_);
  for (const auto& slot : save.slots)
    if (std::find(targets_.paths.begin(), targets_.paths.end(), slot) != targets_.paths.end())
      throw std::invalid_argument("modules_to_save makes " + slot +
                                  " trainable in full, and the LoRA targets adapt it too; exclude it from one");

  // Modules outside the Linear slots (embed_tokens, norms) train in place.
  std::vector<sdk::NamedParameter> in_place;
  for (const auto& module : save.modules)
    for (const auto& p : params)
      if (p.name.rfind(module + ".", 0) == 0 && p.name.find('.', module.size() + 1) == std::string::npos)
        in_place.push_back(p);

  // PEFT trains a copy of a modules_to_save module, so a slot sharing its
  // weight (lm_head tied to embed_tokens) keeps the original: untie it here.
  for (const auto& p : in_place) {
    if (p.tensor.dim() != 2) continue;
    for (const auto& path : paths) {
      if (std::find(save.slots.begin(), save.slots.end(), path) != save.slots.end()) continue;
      auto slot = model.linear(path);
      if (slot->out_features() != p.tensor.size(0) || slot->in_features() != p.tensor.size(1)) continue;
      if (!slot->dense_weight().is_same(p.tensor)) continue;
      at::NoGradGuard no_grad;
      model.replace_linear(path, std::make_shared<PlainLinear>(p.tensor.detach().clone(), slot->bias()));
    }
  }

  const double scaling = options_.scaling();
  for (const auto& path : targets_.paths) {
    auto base = model.linear(path);
    auto [a, b] = init_lora_factors(options_.r, base->in_features(), base->out_features(), options_.init);
    const auto [device, dtype] = device_and_dtype_of(*base);
    // PEFT moves new factors to the base's dtype, then autocast_adapter_dtype
    // casts fp16/bf16 ones back to fp32: A starts rounded to the base dtype.
    a = round_to_base_dtype(a, dtype);
    // DoRA: m = ||W + s B A|| per row with B = 0, i.e. ||W||.
    at::Tensor magnitude = options_.use_dora ? dora_initial_magnitude(base->dense_weight()).to(device) : at::Tensor();
    auto lora = std::make_shared<LoraLinear>(base, a.to(device), b.to(device), scaling, options_.dropout, magnitude);
    model.replace_linear(path, lora);
    wrapped_.push_back({path, lora});
  }

  // After the Linear slots, as PEFT injects target_parameters after target_modules (same draws per seed).
  const std::vector<std::string> peft_modules = peft_modules_of(parameter_targets);
  for (size_t i = 0; i < parameter_targets.size(); ++i) {
    const ParameterTarget& t = parameter_targets[i];
    const at::Tensor w = model.adaptable_parameter(t.path);
    // PEFT's ParamWrapper: [E, out, in] (out, in swapped from the shape's
    // [E, in, out] reading since transformers' experts are not transposed); [out, in] with E = 1.
    const int64_t experts = w.dim() == 3 ? w.size(0) : 1, out = w.size(-2), in = w.size(-1);
    auto [a, b] = init_lora_factors(t.r, in, out, options_.init, t.r * experts);
    a = round_to_base_dtype(a, w.scalar_type());
    const double scaling = options_.use_rslora ? t.alpha / std::sqrt(static_cast<double>(t.r)) : t.alpha / t.r;
    auto lora = std::make_shared<ParameterLora>(experts, a.to(w.device()), b.to(w.device()), scaling);
    model.set_parameter_transform(t.path, lora);
    wrapped_parameters_.push_back({t.path, peft_modules[i], lora});
  }

  for (const auto& path : save.slots) {
    auto slot = model.linear(path);
    at::Tensor weight, bias;
    {
      at::NoGradGuard no_grad;
      weight = slot->dense_weight().detach().clone().set_requires_grad(true);
      if (slot->bias().defined()) bias = slot->bias().detach().clone().set_requires_grad(true);
    }
    model.replace_linear(path, std::make_shared<PlainLinear>(weight, bias));
    full_params_.push_back({path + ".weight", weight});
    if (bias.defined()) full_params_.push_back({path + ".bias", bias});
  }
  for (auto& p : in_place) {
    p.tensor.set_requires_grad(true);
    full_params_.push_back(p);
  }
  applied_ = true;

  sdk::ParamGroupSpec group;
  group.name = "lora";
  for (const auto& w : wrapped_) {
    group.params.push_back({w.path + ".lora_A.weight", w.module->lora_a()});
    group.params.push_back({w.path + ".lora_B.weight", w.module->lora_b()});
    if (w.module->use_dora()) group.params.push_back({w.path + ".lora_magnitude_vector.weight", w.module->magnitude()});
  }
  for (const auto& w : wrapped_parameters_) {
    group.params.push_back({w.peft_module + ".lora_A.weight", w.module->lora_a()});
    group.params.push_back({w.peft_module + ".lora_B.weight", w.module->lora_b()});
  }
  for (const auto& p : full_params_) group.params.push_back(p);
  return {group};
}

std::vector<std::pair<std::string, at::Tensor>> LoraAdapter::adapter_tensors() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& w : wrapped_) {
    out.emplace_back(kPeftPrefix + w.path + ".lora_A.weight", w.module->lora_a());
    out.emplace_back(kPeftPrefix + w.path + ".lora_B.weight", w.module->lora_b());
    // PEFT saves m without ".weight" (its state dict drops it for this one).
    if (w.module->use_dora()) out.emplace_back(kPeftPrefix + w.path + ".lora_magnitude_vector", w.module->magnitude());
  }
  for (const auto& w : wrapped_parameters_) {
    out.emplace_back(kPeftPrefix + w.peft_module + ".lora_A.weight", w.module->lora_a());
    out.emplace_back(kPeftPrefix + w.peft_module + ".lora_B.weight", w.module->lora_b());
  }
  for (const auto& p : full_params_) out.emplace_back(kPeftPrefix + p.name, p.tensor);
  return out;
}

sdk::TensorMap LoraAdapter::save() const {
  check_state("save()");
  sdk::TensorMap out;
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : adapter_tensors())
    out.add(name, tensor.detach().to(at::kCPU).clone(at::MemoryFormat::Contiguous));
  out.metadata["format"] = "pt";  // what PEFT's save_pretrained writes
  return out;
}

std::string LoraAdapter::peft_config_json() const {
  if (!applied_ && (options_.all_linear()))
    throw std::logic_error("adapter/lora: peft_config_json() before apply() (all-linear is resolved on the model)");
  ResolvedTargets resolved;
  for (const auto& n : options_.all_linear() ? targets_.short_names : options_.target_modules)
    if (std::find(resolved.module_names.begin(), resolved.module_names.end(), n) == resolved.module_names.end())
      resolved.module_names.push_back(n);
  resolved.parameter_names = options_.target_parameters;
  if (moe_all_linear_)
    for (const char* n : {"gate.weight", "gate_up_proj", "down_proj"})
      if (std::find(resolved.parameter_names.begin(), resolved.parameter_names.end(), n) == resolved.parameter_names.end())
        resolved.parameter_names.push_back(n);
  resolved.fused_gate_up = moe_all_linear_ || options_.gate_up_at_double_rank;
  return lora::peft_config_json(options_, resolved);
}

void LoraAdapter::load(const sdk::TensorMap& weights) {
  check_state("load()");
  std::vector<std::string> problems;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (ours, stored)
  std::vector<std::string> expected;
  for (const auto& [name, ours] : adapter_tensors()) {
    expected.push_back(name);
    const at::Tensor* stored = weights.find(name);
    if (!stored) {
      const bool magnitude = name.ends_with(".lora_magnitude_vector");
      problems.push_back(name + ": missing from the file" +
                         (magnitude ? " (use_dora = true, and the file is not a DoRA adapter?)" : ""));
      continue;
    }
    if (stored->sizes() != ours.sizes()) {
      problems.push_back(name + ": " + shape_text(stored->sizes()) + " in the file, this adapter needs " +
                         shape_text(ours.sizes()) + " (r = " + std::to_string(options_.r) + ")");
      continue;
    }
    if (!at::isFloatingType(stored->scalar_type())) {
      problems.push_back(name + ": stored as " + std::string(c10::toString(stored->scalar_type())) +
                         ", expected a floating-point tensor");
      continue;
    }
    copies.emplace_back(ours, *stored);
  }
  for (const auto& [name, tensor] : weights.tensors) {
    if (std::find(expected.begin(), expected.end(), name) != expected.end()) continue;
    if (name.ends_with(".lora_magnitude_vector") && !options_.use_dora) {
      problems.push_back(name + ": unexpected; the file is a DoRA adapter: set use_dora = true");
      continue;
    }
    const bool lora = name.find(".lora_") != std::string::npos;
    problems.push_back(name + ": unexpected; " +
                       (lora ? "the file adapts a module this recipe does not target (check target_modules, "
                               "exclude_modules, layers_to_transform)"
                             : "the file trains a module in full that this recipe's modules_to_save does not name"));
  }
  if (!problems.empty()) {
    std::string message = "adapter/lora: the adapter weights do not fit this adapter (" +
                          std::to_string(problems.size()) + " problem" + (problems.size() > 1 ? "s" : "") + "):";
    const size_t limit = 20;
    for (size_t i = 0; i < problems.size() && i < limit; ++i) message += "\n  " + problems[i];
    if (problems.size() > limit) message += "\n  ... and " + std::to_string(problems.size() - limit) + " more";
    throw std::runtime_error(message);
  }
  at::NoGradGuard no_grad;
  for (auto& [ours, stored] : copies) ours.copy_(stored);
}

void LoraAdapter::merge(sdk::ModelView& model) {
  check_state("merge()");
  at::NoGradGuard no_grad;
  for (const auto& w : wrapped_) {
    const auto& base = w.module->base();
    at::Tensor weight = w.module->use_dora()
                            ? dora_merged_weight(base->dense_weight(), w.module->lora_a(), w.module->lora_b(),
                                                 w.module->magnitude(), w.module->scaling())
                            : merged_weight(base->dense_weight(), w.module->lora_a(), w.module->lora_b(),
                                            w.module->scaling());
    at::Tensor bias = base->bias();
    model.replace_linear(w.path, std::make_shared<PlainLinear>(weight.set_requires_grad(false), bias));
  }
  for (const auto& w : wrapped_parameters_) {
    at::Tensor weight = model.adaptable_parameter(w.path);
    weight.copy_(w.module->merged(weight));
    model.set_parameter_transform(w.path, nullptr);
  }
  wrapped_.clear();
  wrapped_parameters_.clear();
  merged_ = true;
}

}  // namespace ftcore::plugins::lora

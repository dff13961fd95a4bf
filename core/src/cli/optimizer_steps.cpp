// The optimizer step harness (optimizer_steps.h): groups and parameters from
// INPUTS, one optimizer step per gradient set, parameters and state out.
#include "optimizer_steps.h"

#include <map>
#include <stdexcept>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/recipe.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/optimizer.h"

namespace ftcore::cli {

namespace {

constexpr const char* kParamPrefix = "param.";
constexpr const char* kStatePrefix = "state.";

// The groups INPUTS declares, each parameter a fresh leaf that requires grad;
// `initial` supplies the starting values (INPUTS', or a resumed file's).
std::vector<sdk::ParamGroupSpec> read_groups(const std::filesystem::path& where, const safetensors::File& inputs,
                                             const safetensors::File& initial,
                                             std::map<std::string, at::Tensor>& params) {
  auto it = inputs.metadata().find("groups");
  if (it == inputs.metadata().end())
    throw std::runtime_error(where.string() + ": no \"groups\" metadata (a JSON list of parameter groups)");
  std::vector<sdk::ParamGroupSpec> groups;
  for (const auto& g : nlohmann::json::parse(it->second)) {
    sdk::ParamGroupSpec spec;
    spec.name = g.at("name");
    spec.lr_scale = g.value("lr_scale", 1.0);
    if (g.contains("weight_decay")) spec.weight_decay = g.at("weight_decay").get<double>();
    for (const auto& n : g.at("params")) {
      const std::string name = n;
      at::Tensor p = initial.tensor(kParamPrefix + name).clone().set_requires_grad(true);
      params[name] = p;
      spec.params.push_back({name, p});
    }
    groups.push_back(std::move(spec));
  }
  return groups;
}

sdk::TensorMap saved_state(const safetensors::File& file) {
  sdk::TensorMap state;
  const std::string prefix = kStatePrefix;
  for (const auto& e : file.entries())
    if (e.name.rfind(prefix, 0) == 0) state.add(e.name.substr(prefix.size()), file.tensor(e.name));
  state.metadata = file.metadata();
  return state;
}

sdk::TensorMap parameters_file(const std::map<std::string, at::Tensor>& params) {
  sdk::TensorMap out;
  for (const auto& [name, p] : params) out.add(kParamPrefix + name, p.detach());
  return out;
}

}  // namespace

void run_optimizer_steps(const PluginRegistry& registry, const OptimizerStepsJob& job) {
  const RegistryEntry* entry = registry.find(sdk::ComponentKind::Optimizer, job.optimizer);
  if (!entry) {
    throw ConfigError({{{"--optimizer", 0, 0}, "no optimizer '" + job.optimizer + "' on the plugin path (known: " +
                                                   join(registry.names(sdk::ComponentKind::Optimizer)) + ")"}});
  }
  const sdk::Options options = options_from_assignments(*entry, job.sets, "[optimizer]");
  auto inputs = safetensors::File::open(job.inputs);
  auto resumed = job.resume.empty() ? nullptr : safetensors::File::open(job.resume);
  std::map<std::string, at::Tensor> params;
  auto groups = read_groups(job.inputs, *inputs, resumed ? *resumed : *inputs, params);
  auto optimizer = registry.create_optimizer(*entry, groups, options);
  if (resumed) optimizer->load_state_by_name(saved_state(*resumed), sdk::StateConversion::Convert);
  for (int64_t step = job.first_step; step < job.first_step + job.steps; ++step) {
    for (auto& [name, p] : params) {
      const auto* grad = inputs->find("grad." + std::to_string(step) + "." + name);
      p.mutable_grad() = grad ? inputs->tensor(grad->name).clone() : at::Tensor();
    }
    optimizer->step();
  }
  safetensors::write_file(job.out, parameters_file(params));
  if (!job.save_state.empty()) {
    sdk::TensorMap file = parameters_file(params);
    sdk::TensorMap state = optimizer->state_by_name();
    for (auto& [name, t] : state.tensors) file.add(kStatePrefix + name, t);
    file.metadata = state.metadata;
    safetensors::write_file(job.save_state, file);
  }
}

}  // namespace ftcore::cli

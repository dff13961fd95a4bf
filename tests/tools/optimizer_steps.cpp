// optimizer_steps: drives any optimizer plugin on tensors prepared by a
// reference script, so Python can compare ftcore's updates with
// torch.optim (or another library) on exactly the same inputs.
//
//   optimizer_steps --optimizer adamw [--set key=value]... --inputs IN.safetensors
//                   --steps N [--first-step K] [--resume STATE.safetensors]
//                   --out OUT.safetensors [--save-state STATE.safetensors]
//
// IN holds "param.<name>" (initial values), "grad.<step>.<name>" (the
// gradient of optimizer step <step>, 0-based) and metadata "groups": a JSON
// list of {"name", "params": [...], "lr_scale", "weight_decay"?}. OUT holds
// the final "param.<name>". --resume loads parameters and optimizer state
// written by --save-state of an earlier process and continues at --first-step.
#include <iostream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/diagnostics.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/optimizer.h"

using namespace ftcore;

namespace {

struct Args {
  std::string optimizer, inputs, out, resume, save_state;
  std::vector<std::string> sets;
  int64_t steps = 0, first_step = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--optimizer") a.optimizer = next();
    else if (k == "--set") a.sets.push_back(next());
    else if (k == "--inputs") a.inputs = next();
    else if (k == "--out") a.out = next();
    else if (k == "--resume") a.resume = next();
    else if (k == "--save-state") a.save_state = next();
    else if (k == "--steps") a.steps = std::stoll(next());
    else if (k == "--first-step") a.first_step = std::stoll(next());
    else throw std::invalid_argument("unknown argument " + k);
  }
  if (a.optimizer.empty() || a.inputs.empty() || a.out.empty()) throw std::invalid_argument("missing arguments");
  return a;
}


}  // namespace

int main(int argc, char** argv) {
  try {
    init_runtime();
    Args args = parse_args(argc, argv);
    PluginRegistry registry;
    PluginSearchOptions search;  // FTCORE_PLUGIN_PATH and the build tree's plugins
    load_plugins(search, registry);
    const RegistryEntry* entry = registry.find(sdk::ComponentKind::Optimizer, args.optimizer);
    if (!entry) throw std::runtime_error("no optimizer plugin " + args.optimizer);

    auto inputs = safetensors::File::open(args.inputs);
    auto resumed = args.resume.empty() ? nullptr : safetensors::File::open(args.resume);
    auto groups_json = nlohmann::json::parse(inputs->metadata().at("groups"));
    std::map<std::string, at::Tensor> params;
    std::vector<sdk::ParamGroupSpec> groups;
    for (const auto& g : groups_json) {
      sdk::ParamGroupSpec spec;
      spec.name = g.at("name");
      spec.lr_scale = g.value("lr_scale", 1.0);
      if (g.contains("weight_decay")) spec.weight_decay = g.at("weight_decay").get<double>();
      for (const auto& n : g.at("params")) {
        const std::string name = n;
        at::Tensor initial = resumed ? resumed->tensor("param." + name) : inputs->tensor("param." + name);
        at::Tensor p = initial.clone().set_requires_grad(true);
        params[name] = p;
        spec.params.push_back({name, p});
      }
      groups.push_back(std::move(spec));
    }
    auto optimizer = registry.create_optimizer(*entry, groups, options_from_assignments(*entry, args.sets, "[optimizer]"));
    if (resumed) {
      sdk::TensorMap state;
      for (const auto& e : resumed->entries())
        if (e.name.rfind("state.", 0) == 0) state.add(e.name.substr(6), resumed->tensor(e.name));
      state.metadata = resumed->metadata();
      optimizer->load_state_by_name(state, sdk::StateConversion::Convert);
    }
    for (int64_t step = args.first_step; step < args.first_step + args.steps; ++step) {
      for (auto& [name, p] : params) {
        const auto* e = inputs->find("grad." + std::to_string(step) + "." + name);
        if (e) p.mutable_grad() = inputs->tensor(e->name).clone();
        else p.mutable_grad() = at::Tensor();
      }
      optimizer->step();
    }
    sdk::TensorMap out;
    for (const auto& [name, p] : params) out.add("param." + name, p.detach());
    safetensors::write_file(args.out, out);
    if (!args.save_state.empty()) {
      sdk::TensorMap state = optimizer->state_by_name();
      sdk::TensorMap file;
      for (const auto& [name, p] : params) file.add("param." + name, p.detach());
      for (auto& [name, t] : state.tensors) file.add("state." + name, t);
      file.metadata = state.metadata;
      safetensors::write_file(args.save_state, file);
    }
    return 0;
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "optimizer_steps: " << e.what() << "\n";
    return 1;
  }
}

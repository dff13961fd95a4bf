// paged_optimizer_driver: ftcore's side of benchmarks/paged_optimizer.py.
// Times optimizer steps of one optimizer plugin on SmolLM2-135M's parameter
// shapes (fp32 parameters and gradients, every parameter stepped), with its
// state file in --run-folder, and prints one JSON line
// {"optimizer", "ms_per_step", "numel", "tensors"}.
//
//   paged_optimizer_driver --optimizer paged_adamw_32bit [--set key=value]... --steps N
//                          [--warmup W] [--run-folder DIR]
#include <chrono>
#include <iostream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/diagnostics.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/optimizer.h"

using namespace ftcore;

namespace {

// SmolLM2-135M: 30 layers, hidden 576, MLP 1536, 3 KV heads of 64, vocabulary 49152 (134.5M parameters).
std::vector<std::vector<int64_t>> smollm2_135m_shapes() {
  std::vector<std::vector<int64_t>> s{{49152, 576}};
  for (int l = 0; l < 30; ++l)
    for (auto shape : std::vector<std::vector<int64_t>>{{576, 576}, {192, 576}, {192, 576}, {576, 576},
                                                        {1536, 576}, {1536, 576}, {576, 1536}, {576}, {576}})
      s.push_back(shape);
  s.push_back({576});
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    init_runtime();
    std::string optimizer_name, run_folder, sets;
    int64_t steps = 5, warmup = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--optimizer") optimizer_name = v;
      else if (k == "--set") sets += v + "\n";
      else if (k == "--steps") steps = std::stoll(v);
      else if (k == "--warmup") warmup = std::stoll(v);
      else if (k == "--run-folder") run_folder = v;
      else throw std::invalid_argument("unknown argument " + k);
    }
    PluginRegistry registry;
    PluginSearchOptions search;
    load_plugins(search, registry);
    const RegistryEntry* entry = registry.find(sdk::ComponentKind::Optimizer, optimizer_name);
    if (!entry) throw std::runtime_error("no optimizer plugin " + optimizer_name);
    at::manual_seed(0);
    sdk::ParamGroupSpec group;
    const auto shapes = smollm2_135m_shapes();
    int64_t numel = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      at::Tensor p = at::randn(shapes[i]).set_requires_grad(true);
      p.mutable_grad() = at::randn(shapes[i]) * 1e-3;
      numel += p.numel();
      group.params.push_back({"p" + std::to_string(i), p});
    }
    toml::table table = toml::parse(std::string_view(sets), std::string_view("--set"));
    std::vector<Diagnostic> diagnostics;
    auto values = validate_table(table, *entry->params, "[optimizer]", {}, diagnostics);
    if (!diagnostics.empty()) throw ConfigError(diagnostics);
    auto optimizer = registry.create_optimizer(*entry, {group}, sdk::Options(entry->params, values));
    if (!run_folder.empty()) optimizer->attach_run_folder(run_folder);
    for (int64_t w = 0; w < warmup; ++w) optimizer->step();  // state created, caches warm
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < steps; ++s) optimizer->step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    std::cout << nlohmann::json{{"optimizer", optimizer_name}, {"ms_per_step", ms}, {"numel", numel},
                                {"tensors", shapes.size()}}.dump() << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "paged_optimizer_driver: " << e.what() << "\n";
    return 1;
  }
}

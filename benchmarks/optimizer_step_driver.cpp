// optimizer_step_driver: ftcore's side of benchmarks/optimizer_step.py.
// Times optimizer steps of the given optimizer plugins on a parameter set
// (fp32 parameters and gradients, every parameter stepped), and a STREAM
// triad (a = b + s*c over 3 x 128 MiB) with the same threads, and prints one
// JSON line per measurement: {"set", "optimizer", "ms_per_step", "numel",
// "tensors"} and {"triad_gbs"}.
//
//   optimizer_step_driver --set lora|135m --steps N --optimizers adamw,adamw_8bit,...
//
// Sets: "lora": 300 tensors of 16x2048 / 2048x16 (LoRA A and B of rank 16,
// 9.8M parameters); "135m": SmolLM2-135M's tensors (30 layers, hidden 576,
// MLP 1536, 3 KV heads of 64, vocabulary 49152; 134.5M parameters).
#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "ftcore/diagnostics.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/parallel.h"

using namespace ftcore;

namespace {

std::vector<std::vector<int64_t>> shapes_of(const std::string& set) {
  std::vector<std::vector<int64_t>> s;
  if (set == "lora") {
    for (int i = 0; i < 150; ++i) {
      s.push_back({16, 2048});
      s.push_back({2048, 16});
    }
  } else if (set == "135m") {
    s.push_back({49152, 576});
    for (int l = 0; l < 30; ++l) {
      for (auto shape : std::vector<std::vector<int64_t>>{{576, 576}, {192, 576}, {192, 576}, {576, 576},
                                                          {1536, 576}, {1536, 576}, {576, 1536}, {576}, {576}})
        s.push_back(shape);
    }
    s.push_back({576});
  } else {
    throw std::invalid_argument("--set must be lora or 135m, got " + set);
  }
  return s;
}

double triad_gbs() {
  const int64_t n = int64_t{1} << 25;
  at::Tensor a = at::empty({n}), b = at::rand({n}), c = at::rand({n});
  float* pa = a.data_ptr<float>();
  const float* pb = b.data_ptr<float>();
  const float* pc = c.data_ptr<float>();
  const float s = 3.0f;
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    sdk::parallel_for(0, n, 1 << 16, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, sec);
  }
  return 12.0 * static_cast<double>(n) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    init_runtime();
    std::string set = "lora";
    std::string list = "adamw,adamw_8bit,lion,lion_8bit,adafactor,paged_adamw_32bit,paged_adamw_8bit";
    int64_t steps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string k = argv[i];
      if (k == "--set") set = argv[i + 1];
      else if (k == "--steps") steps = std::stoll(argv[i + 1]);
      else if (k == "--optimizers") list = argv[i + 1];
      else throw std::invalid_argument("unknown argument " + k);
    }
    PluginRegistry registry;
    PluginSearchOptions search;
    load_plugins(search, registry);
    const auto shapes = shapes_of(set);
    std::cout << nlohmann::json{{"triad_gbs", triad_gbs()}, {"threads", at::get_num_threads()}}.dump() << std::endl;
    std::stringstream names(list);
    for (std::string name; std::getline(names, name, ',');) {
      const RegistryEntry* entry = registry.find(sdk::ComponentKind::Optimizer, name);
      if (!entry) throw std::runtime_error("no optimizer plugin " + name);
      at::manual_seed(0);
      sdk::ParamGroupSpec group;
      int64_t numel = 0;
      for (size_t i = 0; i < shapes.size(); ++i) {
        at::Tensor p = at::randn(shapes[i]).set_requires_grad(true);
        p.mutable_grad() = at::randn(shapes[i]) * 1e-3;
        numel += p.numel();
        group.params.push_back({"p" + std::to_string(i), p});
      }
      toml::table empty;
      std::vector<Diagnostic> diagnostics;
      auto values = validate_table(empty, *entry->params, "[optimizer]", {}, diagnostics);
      auto optimizer = registry.create_optimizer(*entry, {group}, sdk::Options(entry->params, values));
      for (int w = 0; w < 3; ++w) optimizer->step();  // state allocated, caches warm
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t s = 0; s < steps; ++s) optimizer->step();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
      std::cout << nlohmann::json{{"set", set}, {"optimizer", name}, {"ms_per_step", ms}, {"numel", numel},
                                  {"tensors", shapes.size()}}.dump() << std::endl;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "optimizer_step_driver: " << e.what() << "\n";
    return 1;
  }
}

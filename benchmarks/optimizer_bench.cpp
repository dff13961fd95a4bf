// AdamW step time: ftcore's optimizer/adamw plugin (fused multi-tensor) vs
// torch::optim::AdamW (libtorch's C++ frontend, one op per tensor per term)
// on the same shapes, in one process:
//   lora  — 300 tensors, 9.8M parameters (r=8 A/B pairs of 4096-wide layers)
//   smol  — SmolLM2-135M's 273 tensors, 134.5M parameters
//   tiny  — 1000 tensors of 16 elements: per-tensor overhead
// Targets (issue #2): ftcore <= 0.6x torch's time; per-tensor overhead <= 2 us.
#include <benchmark/benchmark.h>

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include "ftcore/plugin_loader.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/optimizer.h"

using namespace ftcore;

namespace {

std::vector<std::vector<int64_t>> lora_shapes() {
  std::vector<std::vector<int64_t>> s;
  for (int i = 0; i < 150; ++i) {
    s.push_back({8, 4096});  // lora_A
    s.push_back({4096, 8});  // lora_B
  }
  return s;
}

std::vector<std::vector<int64_t>> smollm2_135m_shapes() {
  const int64_t h = 576, kv = 192, ffn = 1536, vocab = 49152;
  std::vector<std::vector<int64_t>> s = {{vocab, h}};
  for (int layer = 0; layer < 30; ++layer) {
    for (auto shape : std::vector<std::vector<int64_t>>{
             {h, h}, {kv, h}, {kv, h}, {h, h}, {ffn, h}, {ffn, h}, {h, ffn}, {h}, {h}})
      s.push_back(shape);
  }
  s.push_back({h});
  return s;
}

std::vector<std::vector<int64_t>> tiny_shapes() { return std::vector<std::vector<int64_t>>(1000, {16}); }

std::vector<std::vector<int64_t>> shapes_for(int which) {
  return which == 0 ? lora_shapes() : which == 1 ? smollm2_135m_shapes() : tiny_shapes();
}

std::vector<at::Tensor> make_params(const std::vector<std::vector<int64_t>>& shapes) {
  at::manual_seed(0);
  std::vector<at::Tensor> params;
  for (const auto& shape : shapes) {
    at::Tensor p = at::randn(shape).set_requires_grad(true);
    p.mutable_grad() = at::randn(shape) * 1e-2;
    params.push_back(p);
  }
  return params;
}

const RegistryEntry& adamw_entry() {
  static PluginRegistry registry;
  static const RegistryEntry* entry = [] {
    PluginSearchOptions search;
    search.explicit_paths = {FTCORE_PLUGIN_DIR};
    search.use_environment = search.use_default_paths = false;
    load_plugins(search, registry);
    return registry.find(sdk::ComponentKind::Optimizer, "adamw");
  }();
  return *entry;
}

void BM_ftcore_adamw(benchmark::State& state) {
  auto shapes = shapes_for(static_cast<int>(state.range(0)));
  auto params = make_params(shapes);
  sdk::ParamGroupSpec group;
  for (size_t i = 0; i < params.size(); ++i) group.params.push_back({"p" + std::to_string(i), params[i]});
  PluginRegistry registry;
  const RegistryEntry& e = adamw_entry();
  auto optimizer = registry.create_optimizer(e, {group}, sdk::Options(e.params, {}));
  optimizer->step();  // allocate state outside the timing
  for (auto _ : state) optimizer->step();
  state.counters["tensors"] = static_cast<double>(params.size());
  state.counters["us_per_tensor"] = benchmark::Counter(static_cast<double>(params.size()),
                                                       benchmark::Counter::kIsIterationInvariantRate |
                                                           benchmark::Counter::kInvert);
}

void BM_torch_adamw(benchmark::State& state) {
  auto shapes = shapes_for(static_cast<int>(state.range(0)));
  auto params = make_params(shapes);
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  optimizer.step();
  for (auto _ : state) optimizer.step();
  state.counters["tensors"] = static_cast<double>(params.size());
  state.counters["us_per_tensor"] = benchmark::Counter(static_cast<double>(params.size()),
                                                       benchmark::Counter::kIsIterationInvariantRate |
                                                           benchmark::Counter::kInvert);
}

}  // namespace

// Arg: 0 = lora, 1 = smol (135M), 2 = tiny (overhead).
BENCHMARK(BM_ftcore_adamw)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_torch_adamw)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  ftcore::init_runtime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

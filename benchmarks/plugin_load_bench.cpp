// Loading every in-tree plugin into a fresh registry (dlopen, ABI checks,
// register functions). Target (issue #2): < 50 ms. Each iteration unloads
// the libraries again (the registry and its handles are destroyed).
#include <benchmark/benchmark.h>

#include "ftcore/plugin_loader.h"

namespace {

void BM_load_all_in_tree_plugins(benchmark::State& state) {
  size_t loaded = 0;
  for (auto _ : state) {
    ftcore::PluginRegistry registry;
    ftcore::PluginSearchOptions search;
    search.explicit_paths = {FTCORE_PLUGIN_DIR};
    search.use_environment = search.use_default_paths = false;
    loaded = ftcore::load_plugins(search, registry).loaded.size();
  }
  state.counters["libraries"] = static_cast<double>(loaded);
}

}  // namespace

BENCHMARK(BM_load_all_in_tree_plugins)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();

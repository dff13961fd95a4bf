// Optimizer state memory, measured: each optimizer plugin is created on a set
// of shapes, takes one step, and the bytes of every tensor its
// state_by_name() returns are summed and compared with the formula (issue #5):
//   lion       4 bytes per parameter (exp_avg, fp32)
//   adafactor  4(M+N) bytes per M x N matrix (exp_avg_sq_row + _col), 4 per
//              element of a 1-D parameter (exp_avg_sq), and for B stacked
//              matrices (>= 3 dims) 4B(M+N); beta1 adds 4 per parameter
//   adamw      8 bytes per parameter, for comparison
// plus 8 bytes per tensor for the int64 step counter adafactor and adamw save.
// Prints one row per (optimizer, shape set) and exits 1 when a measured
// number differs from its formula; ctest runs it with --small.
//
//   optimizer_state_memory [--small]   (--small skips SmolLM2-135M's 134.5M parameters)
#include <cstdio>
#include <cstring>
#include <functional>

#include <ATen/ATen.h>

#include "ftcore/plugin_loader.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/optimizer.h"

using namespace ftcore;

namespace {

using Shapes = std::vector<std::vector<int64_t>>;

struct ShapeSet {
  const char* name;
  Shapes shapes;
};

Shapes lora_shapes() {  // r=8 A/B pairs of 4096-wide layers
  Shapes s;
  for (int i = 0; i < 150; ++i) {
    s.push_back({8, 4096});
    s.push_back({4096, 8});
  }
  return s;
}

Shapes smollm2_135m_shapes() {
  const int64_t h = 576, kv = 192, ffn = 1536, vocab = 49152;
  Shapes s = {{vocab, h}};
  for (int layer = 0; layer < 30; ++layer)
    for (auto shape : Shapes{{h, h}, {kv, h}, {kv, h}, {h, h}, {ffn, h}, {ffn, h}, {h, ffn}, {h}, {h}})
      s.push_back(shape);
  s.push_back({h});
  return s;
}

Shapes mixed_shapes() {  // 1-D to 4-D, and shapes with a 1 in them
  return {{1000, 300}, {300, 1000}, {64}, {1}, {8, 40, 60}, {2, 3, 4, 5}, {1, 512}, {512, 1}, {4096}};
}

// Bytes of the moments by formula (the step counters are counted apart).
int64_t lion_formula(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return 4 * n;
}
int64_t adamw_formula(const std::vector<int64_t>& shape) { return 2 * lion_formula(shape); }
int64_t adafactor_formula(const std::vector<int64_t>& shape, bool beta1) {
  const int64_t first_moment = beta1 ? lion_formula(shape) : 0;
  if (shape.size() < 2) return lion_formula(shape) + first_moment;
  int64_t B = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) B *= shape[i];
  const int64_t M = shape[shape.size() - 2], N = shape.back();
  return 4 * B * (M + N) + first_moment;
}

struct Case {
  const char* label;
  const char* optimizer;
  std::map<std::string, sdk::ParamValue> options;
  std::function<int64_t(const std::vector<int64_t>&)> formula;
};

const PluginRegistry& registry() {
  static PluginRegistry r;
  static bool loaded = [] {
    PluginSearchOptions search;
    search.explicit_paths = {FTCORE_PLUGIN_DIR};
    search.use_environment = search.use_default_paths = false;
    load_plugins(search, r);
    return true;
  }();
  (void)loaded;
  return r;
}

// Returns false when the measurement differs from the formula.
bool measure(const Case& c, const ShapeSet& set) {
  const RegistryEntry* entry = registry().find(sdk::ComponentKind::Optimizer, c.optimizer);
  if (!entry) {
    std::printf("no optimizer plugin %s in %s\n", c.optimizer, FTCORE_PLUGIN_DIR);
    return false;
  }
  at::manual_seed(0);
  sdk::ParamGroupSpec group;
  int64_t params = 0, formula = 0;
  for (size_t i = 0; i < set.shapes.size(); ++i) {
    at::Tensor p = at::randn(set.shapes[i]).set_requires_grad(true);
    p.mutable_grad() = at::randn(set.shapes[i]) * 1e-2;
    group.params.push_back({"p" + std::to_string(i), p});
    params += p.numel();
    formula += c.formula(set.shapes[i]);
  }
  auto optimizer = registry().create_optimizer(*entry, {group}, sdk::Options(entry->params, c.options));
  optimizer->step();
  int64_t moments = 0, counters = 0;
  for (const auto& [name, t] : optimizer->state_by_name().tensors) {
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    (name.size() > 5 && name.compare(name.size() - 5, 5, ".step") == 0 ? counters : moments) += bytes;
  }
  const bool ok = moments == formula;
  std::printf("%-18s %-8s %10lld %14lld %14lld %9.4f %9.4f %12lld  %s\n", c.label, set.name,
              static_cast<long long>(params), static_cast<long long>(moments), static_cast<long long>(formula),
              static_cast<double>(moments) / static_cast<double>(params),
              static_cast<double>(moments + counters) / static_cast<double>(params), static_cast<long long>(counters),
              ok ? "ok" : "DIFFERS FROM FORMULA");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  init_runtime();
  const bool small = argc > 1 && std::strcmp(argv[1], "--small") == 0;
  std::vector<ShapeSet> sets = {{"lora", lora_shapes()}, {"mixed", mixed_shapes()}};
  if (!small) sets.push_back({"smollm2", smollm2_135m_shapes()});
  const std::vector<Case> cases = {
      {"lion", "lion", {}, lion_formula},
      {"adafactor", "adafactor", {}, [](const auto& s) { return adafactor_formula(s, false); }},
      {"adafactor beta1", "adafactor", {{"beta1", 0.9}}, [](const auto& s) { return adafactor_formula(s, true); }},
      {"adamw", "adamw", {}, adamw_formula},
  };
  std::printf("%-18s %-8s %10s %14s %14s %9s %9s %12s\n", "optimizer", "shapes", "params", "moment bytes",
              "formula", "B/param", "+steps", "step bytes");
  bool ok = true;
  for (const auto& c : cases)
    for (const auto& set : sets) ok = measure(c, set) && ok;
  return ok ? 0 : 1;
}

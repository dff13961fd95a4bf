// gptq_tool: drives quantizer/gptq (through the plugin registry) on tensors
// prepared by tests/reference/gptq_reference.py, so Python can check the
// codes, the packed layout and the products against its own GPTQ.
//
//   gptq_tool quantize [--set key=value]... --inputs IN.safetensors --out OUT.safetensors
//     IN: "weight.<L>" [out, in], "calib.<L>.<k>" [N, in] (fed in k order),
//         optional "x.<L>" [..., in] and "g.<L>" [..., out].
//     OUT: to_tensors("<L>") (qweight, qzeros, scales, g_idx, metadata) plus
//          the products listed under products().
//   gptq_tool load --inputs PACKED.safetensors --out OUT.safetensors
//     PACKED: "<L>.qweight/.qzeros/.scales/.g_idx" (+ "x.<L>", "g.<L>");
//     OUT: the same products, and to_tensors("rt.<L>") of what was loaded.
//   gptq_tool bench [--set key=value]... --out-features O --in-features I --batches B --tokens T
//     Random correlated inputs; prints the wall time of calibration and quantize.
// Each layer's timings are printed to stdout as one JSON line.
#include <chrono>
#include <iostream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/diagnostics.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/quantizer.h"

using namespace ftcore;

namespace {

struct Args {
  std::string mode, inputs, out;
  std::vector<std::string> sets;
  int64_t out_features = 0, in_features = 0, batches = 0, tokens = 0;
};

Args parse_args(int argc, char** argv) {
  Args a;
  if (argc < 2) throw std::invalid_argument("usage: gptq_tool quantize|load|bench ...");
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--set") a.sets.push_back(next());
    else if (k == "--inputs") a.inputs = next();
    else if (k == "--out") a.out = next();
    else if (k == "--out-features") a.out_features = std::stoll(next());
    else if (k == "--in-features") a.in_features = std::stoll(next());
    else if (k == "--batches") a.batches = std::stoll(next());
    else if (k == "--tokens") a.tokens = std::stoll(next());
    else throw std::invalid_argument("unknown argument " + k);
  }
  return a;
}


double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Dequantized weights in three dtypes, and the two products when x / g are given.
void products(const sdk::Quantizer& q, const sdk::QuantizedWeight& w, const std::string& layer,
              const safetensors::File& in, sdk::TensorMap& out) {
  out.add("dequant." + layer, q.dequantize(w, at::kFloat));
  out.add("dequant_bf16." + layer, q.dequantize(w, at::kBFloat16));
  out.add("dequant_f16." + layer, q.dequantize(w, at::kHalf));
  if (in.find("x." + layer)) {
    at::Tensor x = in.tensor("x." + layer);
    out.add("matmul." + layer, q.matmul(x.to(at::kFloat), w));
    out.add("matmul_bf16." + layer, q.matmul(x.to(at::kBFloat16), w));
  }
  if (in.find("g." + layer)) {
    at::Tensor g = in.tensor("g." + layer);
    out.add("grad_input." + layer, q.matmul_grad_input(g.to(at::kFloat), w));
    out.add("grad_input_bf16." + layer, q.matmul_grad_input(g.to(at::kBFloat16), w));
  }
}

void merge(sdk::TensorMap& into, sdk::TensorMap&& from) {
  for (auto& [n, t] : from.tensors) into.add(n, t);
  for (auto& [k, v] : from.metadata) into.metadata[k] = v;
}

int run_quantize(sdk::Quantizer& q, const Args& args) {
  auto in = safetensors::File::open(args.inputs);
  sdk::TensorMap out;
  for (const auto& e : in->entries()) {
    if (e.name.rfind("weight.", 0) != 0) continue;
    const std::string layer = e.name.substr(7);
    auto t0 = std::chrono::steady_clock::now();
    int64_t rows = 0;
    for (int64_t k = 0; in->find("calib." + layer + "." + std::to_string(k)); ++k) {
      at::Tensor x = in->tensor("calib." + layer + "." + std::to_string(k));
      q.add_calibration(layer, x);
      rows += x.size(0);
    }
    const double calib_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    sdk::QuantizedWeight w = q.quantize(layer, in->tensor(e.name));
    const double quant_s = seconds_since(t0);
    std::cout << nlohmann::json{{"layer", layer}, {"rows", rows}, {"calibration_s", calib_s}, {"quantize_s", quant_s}}.dump()
              << std::endl;
    merge(out, q.to_tensors(layer, w));
    products(q, w, layer, *in, out);
  }
  safetensors::write_file(args.out, out);
  return 0;
}

int run_load(sdk::Quantizer& q, const Args& args) {
  auto in = safetensors::File::open(args.inputs);
  sdk::TensorMap packed;
  for (const auto& e : in->entries()) packed.add(e.name, in->tensor(e.name));
  packed.metadata = in->metadata();
  sdk::TensorMap out;
  const std::string suffix = ".qweight";
  for (const auto& e : in->entries()) {
    if (e.name.size() <= suffix.size() || e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string layer = e.name.substr(0, e.name.size() - suffix.size());
    sdk::QuantizedWeight w = q.from_tensors(layer, packed);
    merge(out, q.to_tensors("rt." + layer, w));
    products(q, w, layer, *in, out);
  }
  safetensors::write_file(args.out, out);
  return 0;
}

int run_bench(sdk::Quantizer& q, const Args& args) {
  const int64_t I = args.in_features, O = args.out_features;
  if (I <= 0 || O <= 0 || args.batches <= 0 || args.tokens <= 0) throw std::invalid_argument("bench needs --out-features, --in-features, --batches, --tokens");
  at::manual_seed(0);
  // Correlated features: a fixed random mixing of iid normals, with a few loud channels.
  at::Tensor mix = at::randn({I, I}) / std::sqrt(static_cast<double>(I));
  at::Tensor loud = at::ones({I});
  loud.narrow(0, 0, std::max<int64_t>(1, I / 64)).fill_(8.0);
  at::Tensor weight = at::randn({O, I}) * 0.02;
  double calib_s = 0.0;
  for (int64_t b = 0; b < args.batches; ++b) {
    at::Tensor x = at::randn({args.tokens, I}).mm(mix) * loud;
    auto t0 = std::chrono::steady_clock::now();
    q.add_calibration("bench", x);
    calib_s += seconds_since(t0);
  }
  auto t0 = std::chrono::steady_clock::now();
  sdk::QuantizedWeight w = q.quantize("bench", weight);
  const double quant_s = seconds_since(t0);
  std::cout << nlohmann::json{{"shape", {O, I}}, {"rows", args.batches * args.tokens}, {"calibration_s", calib_s},
                              {"quantize_s", quant_s}, {"total_s", calib_s + quant_s}}.dump()
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    init_runtime();
    Args args = parse_args(argc, argv);
    PluginRegistry registry;
    PluginSearchOptions search;  // FTCORE_PLUGIN_PATH and the build tree's plugins
    PluginLoadReport report = load_plugins(search, registry);
    const RegistryEntry* entry = registry.find(sdk::ComponentKind::Quantizer, "gptq");
    if (!entry) {
      std::string why;
      for (const auto& r : report.refused) why += "\n  " + r.reason;
      throw std::runtime_error("no quantizer plugin gptq" + why);
    }
    auto quantizer = registry.create_quantizer(*entry, options_from_assignments(*entry, args.sets, "[quantizer]"));
    if (args.mode == "quantize") return run_quantize(*quantizer, args);
    if (args.mode == "load") return run_load(*quantizer, args);
    if (args.mode == "bench") return run_bench(*quantizer, args);
    throw std::invalid_argument("unknown mode " + args.mode + " (quantize, load, bench)");
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "gptq_tool: " << e.what() << "\n";
    return 1;
  }
}

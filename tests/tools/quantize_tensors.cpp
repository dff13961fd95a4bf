// quantize_tensors: drives a quantizer plugin (quantizer/nf4, quantizer/fp4,
// ...) on tensors prepared by a reference script, so Python can compare
// ftcore's codes, files and products with bitsandbytes on the same inputs.
//
//   quantize_tensors --quantizer nf4 [--set key=value]... --mode MODE --inputs IN --out OUT
//
// MODE
//   quantize     every tensor <name> of IN -> to_tensors(<name>, quantize(<name>, t)) in OUT;
//                metadata "bytes.<name>" = packed bytes + state nbytes, "numel.<name>".
//   dequantize   every prefix of IN that has "<prefix>.weight.quant_state.bitsandbytes__*":
//                from_tensors(<prefix>, IN), OUT "<prefix>" = dequantize(W, --dtype or W's dtype).
//   matmul       as dequantize for the weights; --xs X holds "x.<prefix>" and/or "g.<prefix>":
//                OUT "y.<prefix>" = matmul(x, W), "gx.<prefix>" = matmul_grad_input(g, W).
//   bench        --shapes OUTxIN,... --tokens M [--repeat R]: prints JSON lines with the
//                seconds of dequantize (bf16) into a reused, already-touched output
//                ("dequant_s": a caching CPU allocator hands the same buffer back each
//                call) and end to end with a fresh allocation ("dequant_alloc_s": the
//                default allocator; includes the page faults of a new output), a STREAM
//                triad over the same bytes, and matmul + matmul_grad_input vs dense bf16
//                at::mm of the same shapes.
#include <algorithm>
#include <chrono>
#include <iostream>

#include <cstdlib>
#include <map>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <nlohmann/json.hpp>

#include "ftcore/diagnostics.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/parallel.h"
#include "ftcore/sdk/quantizer.h"

using namespace ftcore;

namespace {

struct Args {
  std::string quantizer, mode, inputs, out, xs, dtype, shapes;
  std::vector<std::string> sets;
  int64_t tokens = 512, repeat = 5;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
      return argv[++i];
    };
    if (k == "--quantizer") a.quantizer = next();
    else if (k == "--set") a.sets.push_back(next());
    else if (k == "--mode") a.mode = next();
    else if (k == "--inputs") a.inputs = next();
    else if (k == "--out") a.out = next();
    else if (k == "--xs") a.xs = next();
    else if (k == "--dtype") a.dtype = next();
    else if (k == "--shapes") a.shapes = next();
    else if (k == "--tokens") a.tokens = std::stoll(next());
    else if (k == "--repeat") a.repeat = std::stoll(next());
    else throw std::invalid_argument("unknown argument " + k);
  }
  if (a.quantizer.empty() || a.mode.empty()) throw std::invalid_argument("missing --quantizer or --mode");
  if (a.mode != "bench" && (a.inputs.empty() || a.out.empty())) throw std::invalid_argument("missing --inputs or --out");
  return a;
}


sdk::TensorMap read_all(const std::string& path) {
  auto f = safetensors::File::open(path);
  sdk::TensorMap m;
  for (const auto& e : f->entries()) m.add(e.name, f->tensor(e.name));
  m.metadata = f->metadata();
  return m;
}

at::ScalarType dtype_named(const std::string& s) {
  if (s == "float32") return at::kFloat;
  if (s == "bfloat16") return at::kBFloat16;
  if (s == "float16") return at::kHalf;
  throw std::invalid_argument("--dtype " + s + ": float32, bfloat16 or float16");
}

// Prefixes of the quantized weights in a file ("<prefix>.weight.quant_state.bitsandbytes__*").
std::vector<std::string> quantized_prefixes(const sdk::TensorMap& m) {
  std::vector<std::string> out;
  const std::string tag = ".weight.quant_state.";
  for (const auto& [name, t] : m.tensors) {
    const size_t p = name.rfind(tag);
    if (p != std::string::npos) out.push_back(name.substr(0, p));
  }
  return out;
}

double seconds_of(const std::function<void()>& fn, int64_t repeat) {
  fn();  // warm-up
  double best = 1e30;
  for (int64_t r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// A CPU allocator that keeps freed buffers and hands one of the same size back,
// so a timed call writes into memory that is already mapped and touched (no
// page faults), as a training step's reused activations would be.
class ReuseAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(n);
      if (it != free_.end()) {
        p = it->second;
        free_.erase(it);
      }
    }
    if (!p && posix_memalign(&p, 64, std::max<size_t>(n, 64)) != 0) throw std::bad_alloc();
    auto* ctx = new Block{this, p, n};
    return {p, ctx, &release, c10::Device(c10::kCPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  struct Block {
    ReuseAllocator* owner;
    void* p;
    size_t n;
  };
  static void release(void* ctx) {
    auto* b = static_cast<Block*>(ctx);
    {
      std::lock_guard<std::mutex> lock(b->owner->mutex_);
      b->owner->free_.emplace(b->n, b->p);
    }
    delete b;
  }
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;
};

// Runs fn with `alloc` as the CPU allocator, then restores the previous one.
template <class Fn>
auto with_cpu_allocator(c10::Allocator* alloc, Fn&& fn) {
  c10::Allocator* before = c10::GetCPUAllocator();
  c10::SetCPUAllocator(alloc, /*priority=*/100);
  struct Restore {
    c10::Allocator* a;
    ~Restore() { c10::SetCPUAllocator(a, 100); }
  } restore{before};
  return fn();
}

void bench(sdk::Quantizer& q, const Args& a) {
  static ReuseAllocator reuse;  // outlives every tensor it hands out
  std::string rest = a.shapes;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string s = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const int64_t out = std::stoll(s.substr(0, s.find('x'))), in = std::stoll(s.substr(s.find('x') + 1));
    at::manual_seed(0);
    const at::Tensor w = at::randn({out, in}).to(at::kBFloat16);
    const sdk::QuantizedWeight qw = q.quantize("bench", w);
    const int64_t n = out * in;
    // End to end: a fresh output each call (the default allocator maps new pages).
    const double t_dq_alloc = seconds_of([&] { (void)q.dequantize(qw, at::kBFloat16); }, a.repeat);
    // The kernel: the output (and the expanded absmax) reuse buffers touched by the warm-up.
    const double t_dq = with_cpu_allocator(&reuse, [&] {
      return seconds_of([&] { (void)q.dequantize(qw, at::kBFloat16); }, a.repeat);
    });
    const double state_bytes = static_cast<double>(qw.state->nbytes());
    const double dq_bytes = n / 2.0 + 2.0 * n + state_bytes;
    // STREAM triad a = b + s * c over fp32 arrays moving the same bytes (3 arrays, 12 bytes/element).
    const int64_t tn = std::max<int64_t>(1, static_cast<int64_t>(dq_bytes / 12));
    at::Tensor ta = at::empty({tn}), tb = at::rand({tn}), tc = at::rand({tn});
    float* pa = ta.data_ptr<float>();
    const float* pb = tb.data_ptr<float>();
    const float* pc = tc.data_ptr<float>();
    const double t_triad = seconds_of([&] {
      sdk::parallel_for(0, tn, 1 << 14, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) pa[i] = pb[i] + 3.0f * pc[i];
      });
    }, a.repeat);
    const at::Tensor x = at::randn({a.tokens, in}).to(at::kBFloat16);
    const at::Tensor g = at::randn({a.tokens, out}).to(at::kBFloat16);
    const at::Tensor wd = w.contiguous();
    const double t_q = seconds_of([&] {
      at::Tensor y = q.matmul(x, qw);
      at::Tensor gx = q.matmul_grad_input(g, qw);
    }, a.repeat);
    const double t_dense = seconds_of([&] {
      at::Tensor y = at::mm(x, wd.t());
      at::Tensor gx = at::mm(g, wd);
    }, a.repeat);
    nlohmann::json j = {{"shape", {out, in}},
                        {"threads", at::get_num_threads()},
                        {"dequant_s", t_dq},
                        {"dequant_alloc_s", t_dq_alloc},
                        {"dequant_bytes", dq_bytes},
                        {"triad_s", t_triad},
                        {"triad_bytes", 12.0 * tn},
                        {"tokens", a.tokens},
                        {"quant_fwd_bwd_s", t_q},
                        {"dense_fwd_bwd_s", t_dense}};
    std::cout << j.dump() << std::endl;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    init_runtime();
    Args args = parse_args(argc, argv);
    PluginRegistry registry;
    PluginSearchOptions search;  // FTCORE_PLUGIN_PATH and the build tree's plugins
    const PluginLoadReport report = load_plugins(search, registry);
    const RegistryEntry* entry = registry.find(sdk::ComponentKind::Quantizer, args.quantizer);
    if (!entry) {
      std::string why;
      for (const auto& r : report.refused) why += "\n  " + r.reason;
      throw std::runtime_error("no quantizer plugin " + args.quantizer + why);
    }
    auto quantizer = registry.create_quantizer(*entry, options_from_assignments(*entry, args.sets, "[quantizer]"));

    if (args.mode == "bench") {
      bench(*quantizer, args);
      return 0;
    }
    sdk::TensorMap in = read_all(args.inputs);
    sdk::TensorMap out;
    if (args.mode == "quantize") {
      for (const auto& [name, t] : in.tensors) {
        sdk::QuantizedWeight w = quantizer->quantize(name, t);
        const int64_t bytes = w.packed.numel() * w.packed.element_size() + w.state->nbytes();
        out.metadata["bytes." + name] = std::to_string(bytes);
        out.metadata["numel." + name] = std::to_string(t.numel());
        for (auto& [n, v] : quantizer->to_tensors(name, w).tensors) out.add(n, v.contiguous());
      }
    } else if (args.mode == "dequantize" || args.mode == "matmul") {
      sdk::TensorMap xs;
      if (args.mode == "matmul") xs = read_all(args.xs);
      for (const std::string& prefix : quantized_prefixes(in)) {
        sdk::QuantizedWeight w = quantizer->from_tensors(prefix, in);
        if (args.mode == "dequantize") {
          out.add(prefix, quantizer->dequantize(w, args.dtype.empty() ? w.dtype : dtype_named(args.dtype)));
          continue;
        }
        if (const at::Tensor* x = xs.find("x." + prefix)) out.add("y." + prefix, quantizer->matmul(*x, w));
        if (const at::Tensor* g = xs.find("g." + prefix))
          out.add("gx." + prefix, quantizer->matmul_grad_input(*g, w));
      }
    } else {
      throw std::invalid_argument("--mode " + args.mode + ": quantize, dequantize, matmul or bench");
    }
    safetensors::write_file(args.out, out);
    return 0;
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "quantize_tensors: " << e.what() << "\n";
    return 1;
  }
}

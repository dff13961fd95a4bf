// ftcore's side of benchmarks/moe_bench.py: load an HF MoE folder and time,
// on a fixed random batch [B, T], inference forwards (full logits, no grad)
// and training steps (forward + cross-entropy with the router aux loss +
// backward; no optimizer). MODE full: backward into every weight; lora:
// adapter/lora with all-linear (r 8, alpha 16: attention, routers and expert
// stacks, as PEFT's all-linear), backward into the LoRA tensors only.
// Prints one JSON line. FTCORE_PROFILE=FILE: one more training step, after
// the timed ones, is profiled into FILE (benchmarks/profile_table.py FILE).
//
// usage: moe_bench_driver MODEL_DIR DTYPE(fp32|bf16) B T ITERS [full|lora]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "ftcore/model.h"
#include "ftcore/model_moe.h"
#include "ftcore/op_profile.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/adapter.h"

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
std::vector<double> time_iterations(int iters, F&& body) {
  using clock = std::chrono::steady_clock;
  body();  // warmup
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const auto start = clock::now();
    body();
    times.push_back(std::chrono::duration<double>(clock::now() - start).count());
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: moe_bench_driver MODEL_DIR DTYPE B T ITERS [full|lora]\n";
    return 2;
  }
  const int threads = ftcore::init_runtime();
  ftcore::LoadOptions options;
  options.dtype = ftcore::parse_dtype_name(argv[2]);
  const int64_t batch = std::stoll(argv[3]), tokens = std::stoll(argv[4]);
  const int iters = std::stoi(argv[5]);
  auto model = ftcore::Model::from_pretrained(argv[1], options);
  const auto& c = model->config();
  at::manual_seed(0);
  const at::Tensor ids = at::randint(0, c.vocab_size, {batch, tokens}, at::kLong);

  const auto forward_times = time_iterations(iters, [&] {
    at::NoGradGuard no_grad;
    ftcore::ForwardInput in;
    in.input_ids = ids;
    model->forward(in);
  });
  const std::string mode = argc > 6 ? argv[6] : "full";
  std::shared_ptr<ftcore::sdk::Adapter> adapter;  // kept alive with the slots it replaced
  if (mode == "lora") {
    for (const auto& p : model->named_parameters()) p.tensor.requires_grad_(false);
    ftcore::PluginRegistry registry;
    ftcore::load_plugins(ftcore::PluginSearchOptions{}, registry);
    const ftcore::RegistryEntry* entry = registry.find(ftcore::sdk::ComponentKind::Adapter, "lora");
    if (!entry) throw std::runtime_error("no adapter plugin lora (build the ftcore_adapter_lora target)");
    adapter = registry.create_adapter(*entry, ftcore::options_from_assignments(
                                                  *entry, {"r = 8", "alpha = 16.0", "target_modules = [\"all-linear\"]"},
                                                  "[adapter]"));
    adapter->apply(*model);
  } else if (mode != "full") {
    std::cerr << "moe_bench_driver: MODE must be full or lora, got " << mode << "\n";
    return 2;
  }
  model->module().train();
  const auto train_step = [&] {
    model->module().zero_grad();
    ftcore::model::RouterLogits router;
    ftcore::ForwardInput in;
    in.input_ids = ids;
    in.router_logits = &router;
    const at::Tensor logits = model->forward(in).to(at::kFloat);
    const int64_t v = logits.size(-1);
    at::Tensor loss = at::cross_entropy_loss(logits.narrow(1, 0, tokens - 1).reshape({-1, v}),
                                             ids.narrow(1, 1, tokens - 1).reshape({-1}));
    loss = loss + c.router_aux_loss_coef * ftcore::load_balancing_loss(router, c.num_experts, c.num_experts_per_tok, {});
    loss.backward();
  };
  const auto train_times = time_iterations(iters, train_step);
  if (const auto path = ftcore::requested_profile_path()) {
    ftcore::OpProfile profile(*path);
    train_step();
  }
  const double fwd = median_of(forward_times), train = median_of(train_times);
  std::printf("{\"impl\": \"ftcore\", \"mode\": \"%s\", \"threads\": %d, \"forward_s\": %.4f, \"forward_tokens_per_s\": %.1f, "
              "\"train_s\": %.4f, \"train_tokens_per_s\": %.1f}\n",
              mode.c_str(), threads, fwd, batch * tokens / fwd, train, batch * tokens / train);
  return 0;
}

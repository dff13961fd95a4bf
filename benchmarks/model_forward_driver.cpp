// ftcore's side of benchmarks/model_forward_bench.py: load an HF model
// folder, run inference forwards (full logits [B, T, V]) on a fixed random
// batch [B, T], and print one JSON line: seconds per forward (each timed
// iteration), tokens/s of the median, load time and peak RSS. With
// FTCORE_PROFILE=FILE one more forward, after the timed ones, is profiled
// into FILE (ftcore/op_profile.h; benchmarks/profile_table.py FILE).
//
// usage: model_forward_driver MODEL_DIR DTYPE(fp32|bf16|fp16) B T ITERS [WARMUP]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "ftcore/model.h"
#include "ftcore/op_profile.h"
#include "ftcore/runtime.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::cerr << "usage: model_forward_driver MODEL_DIR DTYPE B T ITERS [WARMUP]\n";
    return 2;
  }
  using clock = std::chrono::steady_clock;
  const int threads = ftcore::init_runtime();
  ftcore::LoadOptions options;
  options.dtype = ftcore::parse_dtype_name(argv[2]);
  const int64_t batch = std::stoll(argv[3]), tokens = std::stoll(argv[4]);
  const int iters = std::stoi(argv[5]), warmup = argc > 6 ? std::stoi(argv[6]) : 1;

  auto start = clock::now();
  auto model = ftcore::Model::from_pretrained(argv[1], options);
  const double load_s = std::chrono::duration<double>(clock::now() - start).count();
  at::manual_seed(0);
  ftcore::ForwardInput in;
  in.input_ids = at::randint(0, model->config().vocab_size, {batch, tokens}, at::kLong);

  at::NoGradGuard no_grad;
  for (int i = 0; i < warmup; ++i) model->forward(in);
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    start = clock::now();
    at::Tensor logits = model->forward(in);
    times.push_back(std::chrono::duration<double>(clock::now() - start).count());
  }
  if (const auto path = ftcore::requested_profile_path()) {
    ftcore::OpProfile profile(*path);
    model->forward(in);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("{\"impl\": \"ftcore\", \"threads\": %d, \"load_s\": %.3f, \"median_s\": %.4f, \"tokens_per_s\": %.1f, "
              "\"peak_rss_mb\": %.1f, \"times_s\": [",
              threads, load_s, median, batch * tokens / median, usage.ru_maxrss / 1024.0);
  for (size_t i = 0; i < times.size(); ++i) std::printf("%s%.4f", i ? ", " : "", times[i]);
  std::printf("]}\n");
  return 0;
}

// `ftcore plugin verify` for the kinds checked on their interface alone:
// every kind's spec (its defaults satisfy its own rules), schedulers (finite,
// defined at step 0 and at total_steps, warmup honoured), samplers (each
// index once per epoch, disjoint shards, the same batches from a fresh
// instance, which is what resuming at a cursor relies on), quantizers
// (round trip, save/load, matmul = dequantize-then-matmul) and loggers (odd
// metric names, flush, close).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "../util/same_bits.h"
#include "ftcore/recipe.h"
#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/quantizer.h"
#include "ftcore/sdk/sampler.h"
#include "ftcore/sdk/scheduler.h"
#include "plugin_verify.h"

namespace fs = std::filesystem;

namespace ftcore::cli {

namespace {

sdk::Options defaults_of(const RegistryEntry& entry) { return options_from_assignments(entry, {}, "defaults"); }

std::string num(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

std::string join_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

void verify_spec(const RegistryEntry& entry, VerifyReport& report) {
  report.check(entry.key(), "the defaults satisfy the spec's " + std::to_string(entry.params->rules().size()) +
                                " rule(s) and validate",
               [&] {
                 for (const auto& p : entry.params->params())
                   if (p.required) throw CheckSkipped("the spec has the required key '" + p.key + "'");
                 defaults_of(entry);  // a broken rule is a ConfigError naming it
                 return "";
               });
}

void verify_scheduler(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report) {
  const std::string key = entry.key();
  std::shared_ptr<sdk::Scheduler> scheduler;
  report.check(key, "constructs with default options", [&] {
    scheduler = registry.create_scheduler(entry, defaults_of(entry), sdk::SchedulerContext{});
    return "";
  });
  if (!scheduler) return;
  report.check(key, "factor(step, total) finite and >= 0 for every step in [0, total], total in {1, 10, 1000}", [&] {
    for (int64_t total : {1, 10, 1000})
      for (int64_t step = 0; step <= total; ++step) {
        const double f = scheduler->factor(step, total);
        expect(std::isfinite(f) && f >= 0.0, "factor(" + std::to_string(step) + ", " + std::to_string(total) +
                                                 ") = " + num(f));
      }
    return "factor(0, 10) = " + num(scheduler->factor(0, 10)) + ", factor(10, 10) = " + num(scheduler->factor(10, 10));
  });
  // Rising up to the peak: transformers' warmups peak at step 10, torch's
  // OneCycleLR (one_cycle) at step 9, so steps 0..9 must not fall.
  report.check(key, "warmup_steps = 10: the factor rises over steps 0..9", [&]() -> std::string {
    if (!entry.params->find("warmup_steps")) throw CheckSkipped("no warmup_steps parameter");
    auto warm = registry.create_scheduler(entry, options_from_assignments(entry, {"warmup_steps = 10"}, "verify"),
                                          sdk::SchedulerContext{});
    const int64_t total = 100;
    for (int64_t step = 0; step + 1 < 10; ++step)
      expect(warm->factor(step, total) <= warm->factor(step + 1, total),
             "factor(" + std::to_string(step) + ") = " + num(warm->factor(step, total)) + " > factor(" +
                 std::to_string(step + 1) + ") = " + num(warm->factor(step + 1, total)));
    expect(warm->factor(0, total) < warm->factor(9, total), "factor(0) = factor(9): no warmup");
    return "factor(0) = " + num(warm->factor(0, total)) + ", factor(9) = " + num(warm->factor(9, total));
  });
}

void verify_sampler(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report) {
  const std::string key = entry.key();
  std::shared_ptr<sdk::Sampler> sampler;
  report.check(key, "constructs with default options", [&] {
    sampler = registry.create_sampler(entry, defaults_of(entry));
    return "";
  });
  if (!sampler) return;
  sdk::SamplerInput input;
  for (int64_t i = 0; i < 37; ++i) input.lengths.push_back(1 + (i * 29) % 64);  // 1..64 tokens, shuffled
  input.batch_size = 4;
  input.sequence_len = 128;
  input.seed = 7;
  auto indices_of = [](const std::vector<sdk::Batch>& batches) {
    std::vector<int64_t> out;
    for (const auto& b : batches)
      for (const auto& row : b.rows) out.insert(out.end(), row.begin(), row.end());
    return out;
  };
  report.check(key, "one process: each of 37 examples exactly once per epoch (epochs 0 and 1)", [&] {
    for (int64_t epoch : {0, 1}) {
      std::vector<int64_t> seen = indices_of(sampler->batches(input, epoch));
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> all(input.lengths.size());
      std::iota(all.begin(), all.end(), 0);
      expect(seen == all, "epoch " + std::to_string(epoch) + " yields " + std::to_string(seen.size()) +
                              " indices, not each of 0..36 once");
    }
    return "";
  });
  // Shards as torch's DistributedSampler cuts them: disjoint but for the
  // padding that evens them out (fewer than world_size repeated units: an
  // example, or a packed row), together covering every example, the same
  // number of batches on every rank.
  report.check(key, "3 ranks: shards cover every index, overlap only by padding (< 3 repeated rows), same batch count",
               [&] {
    const int64_t world = 3, n = static_cast<int64_t>(input.lengths.size());
    std::set<std::vector<int64_t>> rows;
    std::map<int64_t, int64_t> owner_row;  // index -> how many distinct rows hold it
    int64_t total_rows = 0;
    std::vector<size_t> counts;
    for (int64_t rank = 0; rank < world; ++rank) {
      sdk::SamplerInput shard = input;
      shard.rank = rank;
      shard.world_size = world;
      const auto batches = sampler->batches(shard, 0);
      counts.push_back(batches.size());
      expect(counts.back() == counts.front(), "rank 0 has " + std::to_string(counts.front()) + " batches, rank " +
                                                  std::to_string(rank) + " has " + std::to_string(counts.back()));
      for (const auto& b : batches)
        for (auto row : b.rows) {
          ++total_rows;
          for (int64_t i : row) expect(i >= 0 && i < n, "index " + std::to_string(i) + " out of range");
          std::sort(row.begin(), row.end());
          if (rows.insert(row).second)
            for (int64_t i : row) ++owner_row[i];
        }
    }
    const int64_t repeats = total_rows - static_cast<int64_t>(rows.size());
    expect(repeats < world, std::to_string(repeats) + " rows repeated across ranks (padding repeats fewer than " +
                                std::to_string(world) + ")");
    for (int64_t i = 0; i < n; ++i) {
      expect(owner_row.count(i) == 1, "index " + std::to_string(i) + " is in no rank's shard");
      expect(owner_row[i] == 1, "index " + std::to_string(i) + " is in " + std::to_string(owner_row[i]) +
                                    " different rows across ranks");
    }
    return std::to_string(total_rows) + " rows for " + std::to_string(n) + " examples, " +
           std::to_string(counts.front()) + " batches per rank";
  });
  report.check(key, "resume: a fresh instance yields the same batches (the cursor indexes them)", [&] {
    auto fresh = registry.create_sampler(entry, defaults_of(entry));
    for (int64_t epoch : {0, 3}) {
      auto a = sampler->batches(input, epoch), b = fresh->batches(input, epoch);
      expect(a.size() == b.size(), "epoch " + std::to_string(epoch) + ": " + std::to_string(a.size()) + " vs " +
                                       std::to_string(b.size()) + " batches");
      for (size_t i = 0; i < a.size(); ++i)
        expect(a[i].rows == b[i].rows, "epoch " + std::to_string(epoch) + ": batch " + std::to_string(i) + " differs");
    }
    return "";
  });
}

void verify_quantizer(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report) {
  const std::string key = entry.key();
  const std::string path = "model.layers.0.mlp.up_proj";
  at::Generator gen = at::detail::createCPUGenerator(99);
  const at::Tensor weight = at::randn({64, 256}, gen);  // [out, in]
  std::shared_ptr<sdk::Quantizer> quantizer;
  sdk::QuantizedWeight q;
  at::Tensor dq;
  // A GEMM in bf16 (bitsandbytes' default compute dtype) cannot be compared
  // at fp32 precision: a spec that offers compute_dtype = "fp32" is verified with it.
  const sdk::Param* compute = entry.params->find("compute_dtype");
  const bool fp32_compute =
      compute && std::find(compute->choices.begin(), compute->choices.end(), "fp32") != compute->choices.end();
  report.check(key, std::string("quantizes a [64, 256] fp32 weight with default options") +
                        (fp32_compute ? " but compute_dtype = \"fp32\"" : ""), [&] {
    quantizer = registry.create_quantizer(
        entry, fp32_compute ? options_from_assignments(entry, {"compute_dtype = \"fp32\""}, "verify") : defaults_of(entry));
    if (quantizer->needs_calibration()) quantizer->add_calibration(path, at::randn({512, 256}, gen));
    q = quantizer->quantize(path, weight);
    expect(q.shape == std::vector<int64_t>{64, 256}, "the quantized weight records shape " + join_shape(q.shape));
    expect(q.dtype == at::kFloat, "the quantized weight records dtype " + std::string(c10::toString(q.dtype)));
    return q.format + (quantizer->needs_calibration() ? ", calibrated on 512 random rows" : "");
  });
  if (!quantizer || !q.packed.defined()) return;
  report.check(key, "round trip: dequantize is finite, [64, 256], closer to the weight than zero is", [&] {
    dq = quantizer->dequantize(q, at::kFloat);
    expect(dq.sizes() == weight.sizes(), "dequantized to shape " + join_shape(dq.sizes().vec()));
    expect(at::isfinite(dq).all().item<bool>(), "the dequantized weight holds NaN or inf");
    const double error = (weight - dq).norm().item<double>(), scale = weight.norm().item<double>();
    expect(error < scale, "||W - dequantize(quantize(W))|| = " + num(error) + " >= ||W|| = " + num(scale));
    return "relative Frobenius error " + num(error / scale) + ", max abs error " +
           num((weight - dq).abs().max().item<double>());
  });
  if (!dq.defined()) return;
  report.check(key, "save/load: from_tensors(to_tensors()) dequantizes to the same bits", [&] {
    const sdk::TensorMap saved = quantizer->to_tensors(path, q);
    const at::Tensor again = quantizer->dequantize(quantizer->from_tensors(path, saved), at::kFloat);
    expect(same_bits(again, dq), "max difference " + num((again - dq).abs().max().item<double>()));
    return std::to_string(saved.tensors.size()) + " tensors";
  });
  report.check(key, "matmul(x, q) = x @ dequantize(q)^T within 1e-4 x max|result| (fp32, K = 256)", [&] {
    const at::Tensor x = at::randn({5, 256}, gen);
    const at::Tensor ours = quantizer->matmul(x, q), reference = x.matmul(dq.t());
    expect(ours.sizes() == reference.sizes(), "matmul gave shape " + join_shape(ours.sizes().vec()));
    const double diff = (ours - reference).abs().max().item<double>(), bound = 1e-4 * reference.abs().max().item<double>();
    expect(diff <= bound, "max difference " + num(diff) + " > " + num(bound));
    return "max difference " + num(diff);
  });
}

void verify_logger(const PluginRegistry& registry, const RegistryEntry& entry, const fs::path& work_dir,
                   VerifyReport& report) {
  const std::string key = entry.key();
  report.check(key, "odd metric names and text, flush, close", [&] {
    const fs::path dir = work_dir / ("logger-" + entry.name);
    fs::create_directories(dir);
    auto logger = registry.create_logger(entry, defaults_of(entry));
    logger->open({"verify run", dir.string(), {{"recipe_hash", "0"}}});
    sdk::MetricRecord r;
    r.step = 1;
    r.wall_time = 1.7e9;
    r.values = {{"loss", 1.5}, {"train/grad norm", 0.25}, {"a,b\"c", 2.0}, {"ünïcödé λ", 3.0}};
    logger->log_metrics(r);
    r.step = 2;
    r.phase = "eval";
    logger->log_metrics(r);
    logger->log_text(2, "sample/odd \"tag\"", "line one\nline two, with \"quotes\" and a tab\t");
    logger->flush();
    size_t bytes = 0;
    for (const auto& f : fs::recursive_directory_iterator(dir))
      if (f.is_regular_file()) bytes += f.file_size();
    logger->close();
    return bytes ? std::to_string(bytes) + " bytes in the run folder after flush" : "writes no files";
  });
}

}  // namespace ftcore::cli

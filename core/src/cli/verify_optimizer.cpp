// `ftcore plugin verify` for optimizers: a few steps on random parameters in
// several groups (lr_scale, a weight-decay override, a parameter without
// gradients, one whose gradients are zero, a group with lr_scale = 0), fp32
// and bf16, through the same harness as `ftcore plugin steps`; then
// determinism, the state round trip through a FRESH process (bit for bit),
// and CUDA (works, or is refused with a message).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/optimizer.h"
#include "../util/same_bits.h"
#include "optimizer_steps.h"
#include "plugin_verify.h"

namespace fs = std::filesystem;

namespace ftcore::cli {

namespace {

constexpr int64_t kSteps = 6;
constexpr int64_t kResumeAt = 3;

struct TestParam {
  std::string name;
  std::vector<int64_t> shape;
  enum { Random, Zero, None } grads = Random;  // None: never a gradient
};
struct TestGroup {
  std::string name;
  double lr_scale = 1.0;
  std::optional<double> weight_decay;
  std::vector<TestParam> params;
};

// The fp32 job: every group shape the trainer produces.
std::vector<TestGroup> fp32_groups() {
  return {{"base", 1.0, std::nullopt, {{"matrix", {8, 6}}, {"vector", {7}}, {"frozen", {5}, TestParam::None}}},
          {"scaled", 0.5, 0.1, {{"scaled_matrix", {6, 4}}}},
          {"zero_grad", 1.0, 0.0, {{"zero", {4, 3}, TestParam::Zero}}},
          {"paused", 0.0, std::nullopt, {{"paused", {3, 3}}}}};
}

std::vector<TestGroup> bf16_groups() {
  return {{"bf16", 1.0, std::nullopt, {{"bf16_matrix", {8, 6}}, {"bf16_vector", {7}}}}};
}

// Writes the harness's INPUTS file (optimizer_steps.h): seeded parameters and gradients.
void write_inputs(const fs::path& file, const std::vector<TestGroup>& groups, at::ScalarType dtype) {
  at::Generator gen = at::detail::createCPUGenerator(1234);
  sdk::TensorMap map;
  nlohmann::json meta = nlohmann::json::array();
  for (const auto& g : groups) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& p : g.params) {
      names.push_back(p.name);
      map.add("param." + p.name, at::randn(p.shape, gen).to(dtype));
      for (int64_t step = 0; step < kSteps; ++step) {
        if (p.grads == TestParam::None) continue;
        at::Tensor grad = p.grads == TestParam::Zero ? at::zeros(p.shape) : at::randn(p.shape, gen) * 0.1;
        map.add("grad." + std::to_string(step) + "." + p.name, grad.to(dtype));
      }
    }
    nlohmann::json j = {{"name", g.name}, {"params", names}, {"lr_scale", g.lr_scale}};
    if (g.weight_decay) j["weight_decay"] = *g.weight_decay;
    meta.push_back(j);
  }
  map.metadata["groups"] = meta.dump();
  safetensors::write_file(file, map);
}

std::map<std::string, at::Tensor> read_params(const fs::path& file) {
  auto f = safetensors::File::open(file);
  std::map<std::string, at::Tensor> out;
  for (const auto& e : f->entries())
    if (e.name.rfind("param.", 0) == 0) out[e.name.substr(6)] = f->tensor(e.name);
  return out;
}

// The names whose tensors differ between two runs, for a FAIL line.
std::string differing(const std::map<std::string, at::Tensor>& a, const std::map<std::string, at::Tensor>& b) {
  std::vector<std::string> names;
  for (const auto& [name, t] : a)
    if (!b.count(name) || !same_bits(t, b.at(name))) names.push_back(name);
  return join(names);
}

// `ftcore plugin steps` in a child process (this executable), loading only
// `library`; its output goes to `log`, whose last line explains a failure.
void run_steps_in_fresh_process(const fs::path& library, const std::string& optimizer, const fs::path& inputs,
                                const fs::path& out, const std::vector<std::string>& extra, const fs::path& log) {
  std::vector<std::string> args = {fs::read_symlink("/proc/self/exe").string(), "plugin", "steps",
                                   "--library", library.string(), "--optimizer", optimizer,
                                   "--inputs", inputs.string(), "--out", out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  throw CheckFailed("the child `" + join(args, " ") + "` failed: " + last);
}

std::string all_finite(const std::map<std::string, at::Tensor>& params) {
  for (const auto& [name, t] : params)
    if (!at::isfinite(t.to(at::kFloat)).all().item<bool>()) return name;
  return "";
}

}  // namespace

void verify_optimizer(const PluginRegistry& registry, const RegistryEntry& entry, const fs::path& library,
                      const fs::path& work_dir, VerifyReport& report) {
  const std::string key = entry.key();
  const fs::path fp32_in = work_dir / (entry.name + ".fp32.in.safetensors");
  const fs::path bf16_in = work_dir / (entry.name + ".bf16.in.safetensors");
  write_inputs(fp32_in, fp32_groups(), at::kFloat);
  write_inputs(bf16_in, bf16_groups(), at::kBFloat16);
  const auto initial = read_params(fp32_in);

  auto run_here = [&](const fs::path& inputs, const std::string& tag) {
    OptimizerStepsJob job;
    job.optimizer = entry.name;
    job.inputs = inputs;
    job.out = work_dir / (entry.name + "." + tag + ".out.safetensors");
    job.steps = kSteps;
    run_optimizer_steps(registry, job);
    return read_params(job.out);
  };

  std::map<std::string, at::Tensor> first;
  report.check(key, "fp32: " + std::to_string(kSteps) + " steps with default options, 4 groups, results finite",
               [&] {
                 first = run_here(fp32_in, "first");
                 const std::string bad = all_finite(first);
                 expect(bad.empty(), "parameter " + bad + " holds NaN or inf");
                 return "";
               });
  if (first.empty()) return;  // nothing below can run without the first steps
  report.check(key, "parameters with gradients move", [&] {
    expect(!same_bits(first.at("matrix"), initial.at("matrix")), "matrix did not change in " +
                                                                     std::to_string(kSteps) + " steps");
    return "";
  });
  report.check(key, "a parameter without gradients is left alone", [&] {
    expect(same_bits(first.at("frozen"), initial.at("frozen")), "frozen changed although it never had a gradient");
    return "";
  });
  report.check(key, "zero gradients give finite parameters", [&] {
    expect(all_finite({{"zero", first.at("zero")}}).empty(), "zero holds NaN or inf after zero gradients");
    return same_bits(first.at("zero"), initial.at("zero")) ? "unchanged" : "moved (weight decay or state)";
  });
  report.check(key, "a group with lr_scale = 0 does not move", [&] {
    expect(same_bits(first.at("paused"), initial.at("paused")),
           "paused changed: the group's lr is base lr x lr_scale = 0 (max change " +
               std::to_string((first.at("paused") - initial.at("paused")).abs().max().item<double>()) + ")");
    return "";
  });
  report.check(key, "deterministic: a second run gives the same bits", [&] {
    const std::string diff = differing(first, run_here(fp32_in, "second"));
    expect(diff.empty(), "differs in " + diff);
    return "";
  });
  report.check(key, "bf16 parameters: finite, still bf16, moved", [&] {
    const auto out = run_here(bf16_in, "bf16");
    const auto bf16_initial = read_params(bf16_in);
    for (const auto& [name, t] : out) {
      expect(t.scalar_type() == at::kBFloat16, name + " came back as " + std::string(at::toString(t.scalar_type())));
      expect(!same_bits(t, bf16_initial.at(name)), name + " did not change");
    }
    const std::string bad = all_finite(out);
    expect(bad.empty(), "parameter " + bad + " holds NaN or inf");
    return "";
  });
  report.check(key, "state round trip: steps 0-2, save, resume in a fresh process, steps 3-5 = 6 steps bit for bit",
               [&] {
                 const fs::path half = work_dir / (entry.name + ".half.safetensors");
                 const fs::path state = work_dir / (entry.name + ".state.safetensors");
                 const fs::path resumed = work_dir / (entry.name + ".resumed.safetensors");
                 run_steps_in_fresh_process(library, entry.name, fp32_in, half,
                                            {"--steps", std::to_string(kResumeAt), "--save-state", state.string()},
                                            work_dir / (entry.name + ".save.log"));
                 const auto saved = safetensors::File::open(state);
                 expect(saved->metadata().count(sdk::kStateSchemaKey) == 1,
                        std::string("the saved state has no ") + sdk::kStateSchemaKey + " metadata");
                 run_steps_in_fresh_process(library, entry.name, fp32_in, resumed,
                                            {"--steps", std::to_string(kSteps - kResumeAt), "--first-step",
                                             std::to_string(kResumeAt), "--resume", state.string()},
                                            work_dir / (entry.name + ".resume.log"));
                 const std::string diff = differing(first, read_params(resumed));
                 expect(diff.empty(), "the resumed run differs from the uninterrupted one in " + diff);
                 return std::to_string(saved->entries().size()) + " tensors saved";
               });
  report.check(key, "CUDA: steps on CUDA parameters work, or are refused with a message", [&]() -> std::string {
    if (!load_cuda_runtime() || !version_info().cuda_device) throw CheckSkipped("no CUDA device visible");
    at::Tensor p = initial.at("matrix").to(at::kCUDA).clone().set_requires_grad(true);
    std::vector<sdk::ParamGroupSpec> groups(1);
    groups[0].params.push_back({"matrix", p});
    try {
      auto optimizer = registry.create_optimizer(entry, groups, options_from_assignments(entry, {}, "[optimizer]"));
      for (int i = 0; i < 2; ++i) {
        p.mutable_grad() = at::randn_like(p) * 0.1;
        optimizer->step();
      }
    } catch (const std::exception& e) {
      expect(std::strlen(e.what()) > 0, "refused without a message");
      return std::string("refused: ") + e.what();
    }
    expect(at::isfinite(p.detach()).all().item<bool>(), "CUDA steps gave NaN or inf");
    return "2 steps on " + c10::DeviceTypeName(p.device().type(), /*lower_case=*/true);
  });
}

}  // namespace ftcore::cli

// Conformance checks for adapter plugins (ftcore's own and third parties'):
// the properties every sdk::Adapter must have for the trainer, checkpoints
// and `ftcore merge` to work with it, as plain functions that return a
// CheckResult, so they run under any test framework:
//
//   check_zero_init_identity    an untrained adapter leaves the logits unchanged
//   check_save_load_round_trip  save() -> a fresh adapter's load() gives the same logits
//   check_merge_equivalence     merge() gives the logits of the unmerged adapter
//   check_gradient_flow         gradients reach every tensor of the returned
//                               groups and nothing else
//
// The SDK cannot build a model, so the caller provides one (a fresh,
// unadapted sdk::ModelView: the checks apply adapters to it and may merge
// them in, so use a new model per check), a LogitsFn that runs it on fixed
// inputs and returns the logits, and an AdapterFactory that makes a fresh
// adapter with the options under test. With GoogleTest:
//
//   auto model = load_my_model();
//   auto r = ftcore::sdk::testing::check_merge_equivalence(*model, logits_of, make_adapter);
//   EXPECT_TRUE(r.passed) << r.message;
//
// Checks that compare a trained adapter first add seeded Gaussian noise to
// every tensor of the adapter's groups (an untrained LoRA has B = 0, which
// would make most comparisons vacuous), and fail when that noise does not
// move the logits at all. Header-only: ATen and the SDK headers, no test
// framework.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ftcore/sdk/adapter.h"

namespace ftcore::sdk::testing {

struct CheckResult {
  bool passed = true;
  // Every failure, one per line; when passed, what was measured.
  std::string message;
  // The largest |logit difference| the check compared (0 where it compares none).
  double max_abs_diff = 0.0;
  explicit operator bool() const { return passed; }
};

// A new adapter with the options under test, not yet applied (shared_ptr:
// what ftcore's registry returns; a unique_ptr converts).
using AdapterFactory = std::function<std::shared_ptr<Adapter>()>;
// Runs `model` on the caller's fixed inputs and returns its logits (any
// floating dtype). Must be deterministic: eval mode, dropout off. The checks
// decide the grad mode.
using LogitsFn = std::function<at::Tensor(ModelView&)>;

struct PerturbOptions {
  double scale = 0.05;   // std of the noise added to each trainable tensor
  uint64_t seed = 1234;  // its generator's seed (torch's global generator is not touched)
};

namespace detail {

class Report {
 public:
  void fail(const std::string& line) {
    result_.passed = false;
    failures_ << line << "\n";
  }
  void note(const std::string& line) { notes_ << line << " "; }
  void measured(double diff) { result_.max_abs_diff = std::max(result_.max_abs_diff, diff); }
  CheckResult finish(const std::string& check) {
    result_.message = result_.passed ? check + ": passed. " + notes_.str() : check + " failed:\n" + failures_.str();
    return result_;
  }

 private:
  CheckResult result_;
  std::ostringstream failures_, notes_;
};

inline std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

inline at::Tensor logits_no_grad(const LogitsFn& logits, ModelView& model) {
  at::NoGradGuard no_grad;
  return logits(model).detach().to(at::kFloat).clone();
}

// What the trainer does before apply(): nothing of the base trains.
inline void freeze(ModelView& model) {
  for (auto& p : model.named_parameters()) p.tensor.set_requires_grad(false);
}

inline void perturb(const std::vector<ParamGroupSpec>& groups, const PerturbOptions& options) {
  at::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  for (const auto& g : groups)
    for (const auto& p : g.params) {
      at::Tensor noise = at::randn(p.tensor.sizes(), generator, at::TensorOptions().dtype(at::kFloat)) * options.scale;
      p.tensor.add_(noise.to(p.tensor.options()));
    }
}

// Runs `body`, turning an exception into a failure (adapters report misuse by throwing).
template <typename Body>
CheckResult run(const std::string& check, Body body) {
  Report report;
  try {
    body(report);
  } catch (const std::exception& e) {
    report.fail(std::string("threw: ") + e.what());
  }
  return report.finish(check);
}

}  // namespace detail

// apply() on a fresh model leaves the logits within `tolerance` of the
// base's (0 = bit for bit; LoRA with B = 0 is exact, DoRA on a bf16 base is
// not quite). Leaves the adapter applied to `model`.
inline CheckResult check_zero_init_identity(ModelView& model, const LogitsFn& logits,
                                            const AdapterFactory& make_adapter, double tolerance = 0.0) {
  return detail::run("zero-init identity", [&](detail::Report& report) {
    detail::freeze(model);
    const at::Tensor before = detail::logits_no_grad(logits, model);
    auto adapter = make_adapter();
    adapter->apply(model);
    const double diff = detail::max_abs_diff(before, detail::logits_no_grad(logits, model));
    report.measured(diff);
    if (!(diff <= tolerance))
      report.fail("an untrained adapter moves the logits by " + detail::num(diff) + " (tolerance " +
                  detail::num(tolerance) + ")");
    report.note("max |logit diff| " + detail::num(diff) + ".");
  });
}

// Adapter 1 is applied to `first` and perturbed; its save() is loaded by a
// fresh adapter 2 applied to `second` (an identical fresh model). The logits
// of both models must agree within `tolerance`, and adapter 2's save() must
// hold the same names and values. peft_config_json() must not be empty.
inline CheckResult check_save_load_round_trip(ModelView& first, ModelView& second, const LogitsFn& logits,
                                              const AdapterFactory& make_adapter, double tolerance = 0.0,
                                              const PerturbOptions& perturb = {}) {
  return detail::run("save/load round trip", [&](detail::Report& report) {
    detail::freeze(first);
    detail::freeze(second);
    const at::Tensor base = detail::logits_no_grad(logits, second);
    auto saver = make_adapter();
    detail::perturb(saver->apply(first), perturb);
    const TensorMap saved = saver->save();
    if (saved.tensors.empty()) report.fail("save() returned no tensors");
    if (saver->peft_config_json().empty()) report.fail("peft_config_json() is empty");
    auto loader = make_adapter();
    loader->apply(second);
    loader->load(saved);
    const at::Tensor expected = detail::logits_no_grad(logits, first);
    const at::Tensor got = detail::logits_no_grad(logits, second);
    const double diff = detail::max_abs_diff(expected, got);
    const double effect = detail::max_abs_diff(base, got);
    report.measured(diff);
    if (!(diff <= tolerance))
      report.fail("the loaded adapter's logits differ from the saved one's by " + detail::num(diff) +
                  " (tolerance " + detail::num(tolerance) + ")");
    if (!(effect > tolerance))
      report.fail("the loaded adapter does not change the base's logits (by " + detail::num(effect) +
                  "): load() may have kept nothing");
    const TensorMap resaved = loader->save();
    std::set<std::string> names;
    for (const auto& [name, tensor] : saved.tensors) {
      names.insert(name);
      const at::Tensor* again = resaved.find(name);
      if (!again)
        report.fail(name + " is saved by the first adapter, not by the one that loaded it");
      else if (again->sizes() != tensor.sizes() || !at::equal(again->to(tensor.scalar_type()), tensor))
        report.fail(name + " changed in the round trip");
    }
    for (const auto& [name, tensor] : resaved.tensors)
      if (!names.count(name)) report.fail(name + " is saved after load() but was not in the loaded file");
    report.note(std::to_string(saved.tensors.size()) + " tensors; max |logit diff| " + detail::num(diff) +
                ", the adapter moves the logits by " + detail::num(effect) + ".");
  });
}

// The perturbed adapter's logits equal, within `tolerance`, those after
// merge() (which folds it into `model`), and merge() leaves no parameter the
// wrapping introduced: every name is the base's or one the adapter trains
// (a modules_to_save copy), so "<path>.base_layer.weight" must be gone.
inline CheckResult check_merge_equivalence(ModelView& model, const LogitsFn& logits, const AdapterFactory& make_adapter,
                                           double tolerance = 1e-5, const PerturbOptions& perturb = {}) {
  return detail::run("merge equivalence", [&](detail::Report& report) {
    detail::freeze(model);
    const at::Tensor base = detail::logits_no_grad(logits, model);
    std::set<std::string> allowed;
    for (const auto& p : model.named_parameters()) allowed.insert(p.name);
    auto adapter = make_adapter();
    const std::vector<ParamGroupSpec> groups = adapter->apply(model);
    for (const auto& g : groups)
      for (const auto& p : g.params) allowed.insert(p.name);
    detail::perturb(groups, perturb);
    const at::Tensor adapted = detail::logits_no_grad(logits, model);
    adapter->merge(model);
    for (const auto& p : model.named_parameters())
      if (!allowed.count(p.name)) report.fail("after merge() the model still holds " + p.name);
    const at::Tensor merged = detail::logits_no_grad(logits, model);
    const double diff = detail::max_abs_diff(adapted, merged);
    const double effect = detail::max_abs_diff(base, adapted);
    report.measured(diff);
    if (!(diff <= tolerance))
      report.fail("merged logits differ from the adapter's by " + detail::num(diff) + " (tolerance " +
                  detail::num(tolerance) + ")");
    if (!(effect > tolerance))
      report.fail("the perturbed adapter does not change the logits (by " + detail::num(effect) +
                  "): the comparison proves nothing");
    report.note("max |logit diff| " + detail::num(diff) + ", the adapter moves the logits by " + detail::num(effect) +
                ".");
  });
}

// With the base frozen (as the trainer freezes it) and the adapter applied
// and perturbed, a backward pass from the logits (a fixed random projection)
// gives every tensor of the returned groups a finite, non-zero gradient and
// no other parameter a gradient. Also: every group tensor requires grad, has
// a unique non-empty name, and is a parameter of the model under that very
// name (the trainer keys optimizer state and checkpoints by these names), and
// every trainable model parameter is in a group.
inline CheckResult check_gradient_flow(ModelView& model, const LogitsFn& logits, const AdapterFactory& make_adapter,
                                       const PerturbOptions& perturb = {}) {
  return detail::run("gradient flow", [&](detail::Report& report) {
    detail::freeze(model);
    auto adapter = make_adapter();
    const std::vector<ParamGroupSpec> groups = adapter->apply(model);
    detail::perturb(groups, perturb);

    std::map<std::string, at::Tensor> in_model;
    for (const auto& p : model.named_parameters()) in_model[p.name] = p.tensor;
    std::map<std::string, at::Tensor> trainable;
    for (const auto& g : groups)
      for (const auto& p : g.params) {
        if (p.name.empty()) report.fail("group " + g.name + " holds a tensor without a name");
        if (!trainable.emplace(p.name, p.tensor).second) report.fail(p.name + " is in the groups twice");
        if (!p.tensor.requires_grad()) report.fail(p.name + " (group " + g.name + ") does not require grad");
        auto it = in_model.find(p.name);
        if (it == in_model.end())
          report.fail(p.name + " (group " + g.name + ") is not a model parameter of that name");
        else if (!it->second.is_same(p.tensor))
          report.fail(p.name + " (group " + g.name + ") is not the tensor the model holds under that name");
      }
    if (trainable.empty()) report.fail("apply() returned no trainable tensors");
    for (const auto& [name, tensor] : in_model)
      if (tensor.requires_grad() && !trainable.count(name))
        report.fail(name + " requires grad but is in no group: it would never be updated");

    at::Tensor out = logits(model).to(at::kFloat);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(perturb.seed + 1);
    at::Tensor projection = at::randn(out.sizes(), generator, at::TensorOptions().dtype(at::kFloat)).to(out.device());
    (out * projection).sum().backward();

    for (const auto& [name, tensor] : trainable) {
      const at::Tensor& grad = tensor.grad();
      if (!grad.defined())
        report.fail(name + " got no gradient");
      else if (!at::isfinite(grad).all().item<bool>())
        report.fail(name + " got a non-finite gradient");
      else if (grad.abs().max().item<double>() == 0.0)
        report.fail(name + " got an all-zero gradient: it does not influence the logits");
    }
    for (const auto& [name, tensor] : in_model)
      if (!trainable.count(name) && tensor.grad().defined())
        report.fail(name + " is not trainable but got a gradient");
    for (auto& [name, tensor] : in_model) tensor.mutable_grad() = at::Tensor();
    report.note(std::to_string(trainable.size()) + " trainable tensors in " + std::to_string(groups.size()) +
                " groups, " + std::to_string(in_model.size()) + " model parameters.");
  });
}

}  // namespace ftcore::sdk::testing

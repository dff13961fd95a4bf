// `ftcore plugin verify` for adapters: the SDK's conformance checks
// (sdk/testing.h) on tiny random Llamas the core builds here, with the
// adapter's default options. Each check gets fresh models, since the checks
// apply adapters and may merge them in.
#include "ftcore/tiny_random_model.h"
#include "ftcore/recipe.h"
#include "ftcore/sdk/testing.h"
#include "plugin_verify.h"

namespace ftcore::cli {

namespace {

namespace conformance = sdk::testing;

// A value for each required key, so that adapters whose spec has no default
// for some key (relora_steps, loraplus_lr_ratio) are checked too: a number
// the range allows (100 for an integer, 1 for a float, where the range has
// them). Other required types cannot be guessed.
std::vector<std::string> required_assignments(const RegistryEntry& entry) {
  std::vector<std::string> out;
  for (const sdk::Param& p : entry.params->params()) {
    if (!p.required) continue;
    if (p.type != sdk::ParamType::Int && p.type != sdk::ParamType::Float)
      throw CheckSkipped("the spec requires '" + p.key + "', a value verify cannot choose; check it in your own tests");
    double v = p.type == sdk::ParamType::Int ? 100.0 : 1.0;  // a step count past any default warmup
    if (p.range && !p.range->contains(v)) v = p.range->min + (p.range->min_exclusive ? 1.0 : 0.0);
    out.push_back(p.key + " = " + (p.type == sdk::ParamType::Int ? std::to_string(static_cast<int64_t>(v)) : sdk::format_param_value(v)));
  }
  return out;
}

std::string outcome(const conformance::CheckResult& r) {
  if (!r.passed) throw CheckFailed(r.message);
  return r.message;
}

}  // namespace

void verify_adapter(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report) {
  const std::string key = entry.key();
  std::vector<std::string> assignments;
  std::string chosen;
  try {
    assignments = required_assignments(entry);
  } catch (const CheckSkipped& e) {
    const std::string why = e.what();
    report.check(key, "adapter checks", [&]() -> std::string { throw CheckSkipped(why); });
    return;
  }
  for (const auto& a : assignments) chosen += (chosen.empty() ? " (with " : ", ") + a;
  if (!chosen.empty()) chosen += ")";
  const conformance::AdapterFactory make = [&] {
    return registry.create_adapter(entry, options_from_assignments(entry, assignments, "verify"));
  };
  report.check(key, "zero-init identity: an untrained adapter leaves the logits unchanged" + chosen, [&] {
    return outcome(conformance::check_zero_init_identity(*tiny_random_llama(false), tiny_random_llama_logits, make));
  });
  report.check(key, "save/load round trip: a fresh adapter loading save() gives the same logits" + chosen, [&] {
    auto first = tiny_random_llama(false), second = tiny_random_llama(false);
    return outcome(conformance::check_save_load_round_trip(*first, *second, tiny_random_llama_logits, make));
  });
  report.check(key, "merge equivalence: merge() gives the unmerged adapter's logits (1e-5)" + chosen, [&] {
    return outcome(conformance::check_merge_equivalence(*tiny_random_llama(false), tiny_random_llama_logits, make));
  });
  report.check(key, "gradient flow: gradients reach every tensor of the returned groups, nothing else" + chosen, [&] {
    return outcome(conformance::check_gradient_flow(*tiny_random_llama(false), tiny_random_llama_logits, make));
  });
}

}  // namespace ftcore::cli

// `ftcore plugin verify` for adapters: the SDK's conformance checks
// (sdk/testing.h) on tiny random Llamas the core builds here, with the
// adapter's default options. Each check gets fresh models, since the checks
// apply adapters and may merge them in.
#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/model_config.h"
#include "ftcore/recipe.h"
#include "ftcore/sdk/testing.h"
#include "plugin_verify.h"

namespace ftcore::cli {

namespace {

namespace conformance = sdk::testing;

// 2 layers, hidden 32, attention biases, untied embeddings: every Linear
// slot kind an adapter meets in the shipped families' plain layout.
std::shared_ptr<Model> tiny_random_model() {
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"vocab_size", 64},
                                 {"hidden_size", 32},
                                 {"intermediate_size", 48},
                                 {"num_hidden_layers", 2},
                                 {"num_attention_heads", 4},
                                 {"num_key_value_heads", 2},
                                 {"max_position_embeddings", 64},
                                 {"rms_norm_eps", 1e-5},
                                 {"attention_bias", true},
                                 {"tie_word_embeddings", false}};
  auto model = std::make_shared<Model>(parse_model_config(config.dump(), "plugin verify's tiny model"),
                                       at::TensorOptions().dtype(at::kFloat));
  at::Generator gen = at::detail::createCPUGenerator(11);  // every model alike, the global generator untouched
  at::NoGradGuard no_grad;
  for (auto& p : model->named_parameters()) {
    p.tensor.normal_(0.0, 0.1, gen);
    if (p.name.find("norm") != std::string::npos) p.tensor.add_(1.0);
  }
  return model;
}

// Two rows of seven fixed tokens, in eval mode (dropout off).
at::Tensor logits_of(sdk::ModelView& view) {
  auto& model = dynamic_cast<Model&>(view);
  model.module().eval();
  ForwardInput input;
  input.input_ids = at::arange(14, at::kLong).reshape({2, 7}).mul(5).remainder(64);
  return model.forward(input);
}

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
    return outcome(conformance::check_zero_init_identity(*tiny_random_model(), logits_of, make));
  });
  report.check(key, "save/load round trip: a fresh adapter loading save() gives the same logits" + chosen, [&] {
    auto first = tiny_random_model(), second = tiny_random_model();
    return outcome(conformance::check_save_load_round_trip(*first, *second, logits_of, make));
  });
  report.check(key, "merge equivalence: merge() gives the unmerged adapter's logits (1e-5)" + chosen, [&] {
    return outcome(conformance::check_merge_equivalence(*tiny_random_model(), logits_of, make));
  });
  report.check(key, "gradient flow: gradients reach every tensor of the returned groups, nothing else" + chosen, [&] {
    return outcome(conformance::check_gradient_flow(*tiny_random_model(), logits_of, make));
  });
}

}  // namespace ftcore::cli

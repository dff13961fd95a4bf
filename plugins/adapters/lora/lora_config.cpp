// adapter/lora's ParamSpec, LoraOptions, and the PEFT adapter_config.json
// (lora_config.h). Field names and meanings are peft 0.21's LoraConfig.
#include "lora_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ftcore/sdk/option_error.h"
#include "ftcore/sdk/option_fields.h"

namespace ftcore::plugins::lora {

double LoraOptions::scaling() const {
  return use_rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

bool LoraOptions::all_linear() const {
  if (target_modules.size() != 1) return false;
  std::string name = target_modules[0];
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name == "all-linear";
}

sdk::ParamSpec lora_param_spec() {
  sdk::ParamSpec s;
  s.add_int("r", 8).at_least(1).with_doc("Rank of the update: A is [r, in], B is [out, r].");
  s.add_float("alpha", 16.0).above(0.0).with_doc(
      "The update is scaled by alpha / r (alpha / sqrt(r) with use_rslora); PEFT's lora_alpha.");
  s.add_float("dropout", 0.0).with_range(0.0, 1.0, false, true).with_doc(
      "Dropout on the LoRA branch's input during training (PEFT's lora_dropout).");
  s.add_string_list("target_modules", {"q_proj", "v_proj"})
      .with_doc("Linear slots to adapt: a name matches a slot whose path equals it or ends with \".\" + name "
                "(q_proj, mlp.down_proj, model.layers.0.self_attn.q_proj); [\"all-linear\"] = every Linear but "
                "the output layer (lm_head). Each name must match a slot.");
  s.add_string_list("target_parameters", {})
      .with_doc("Parameters to adapt in place (PEFT's target_parameters): the MoE router and expert stacks, "
                "e.g. [\"mlp.experts.gate_up_proj\", \"mlp.experts.down_proj\", \"mlp.gate.weight\"]; a name "
                "matches a parameter whose HF name equals it or ends with \".\" + name. A 3-D expert stack gets "
                "a rank-r update per expert. all-linear on an MoE model adds all three (gate_up_proj at rank 2r, "
                "alpha 2 alpha), as PEFT does. Not with dropout > 0 or use_dora (PEFT refuses both).");
  s.add_string("target_regex", "")
      .with_doc("Instead of target_modules: a regex (ECMAScript) that must match a slot's whole path, "
                "e.g. 'model\\.layers\\.[0-3]\\.self_attn\\.(q|v)_proj' (PEFT's target_modules as a string).");
  s.add_string_list("exclude_modules", {})
      .with_doc("Slots never adapted: a path equal to a name or ending with \".\" + name.");
  s.add_int_list("layers_to_transform", {})
      .at_least(0)
      .with_doc("Only adapt these decoder layers (model.layers.N); empty = all. Not with target_regex or "
                "all-linear (PEFT refuses that too).");
  s.add_string_list("modules_to_save", {})
      .with_doc("Modules trained in full and saved with the adapter, e.g. lm_head, embed_tokens (a module "
                "matches when its path ends with the name). A tied lm_head/embed_tokens pair is untied, as PEFT does.");
  s.add_bool("fan_in_fan_out", false)
      .with_doc("PEFT's flag for bases storing W as [in, out] (GPT-2 Conv1D). Every ftcore slot is a Linear "
                "[out, in], so true is reset to false with a warning, as PEFT does for nn.Linear.");
  s.add_enum("init", {"kaiming", "gaussian"}, std::string("kaiming"))
      .with_doc("A's initialisation (B starts at zero): kaiming = Kaiming-uniform(a=sqrt(5)), |A| <= 1/sqrt(in) "
                "(PEFT's init_lora_weights=true); gaussian = normal with std 1/r.");
  s.add_bool("use_rslora", false).with_doc("Rank-stabilised scaling alpha / sqrt(r) (arXiv 2312.03732).");
  s.add_bool("use_dora", false)
      .with_doc("DoRA (arXiv 2402.09353): a trainable magnitude per output row (lora_magnitude_vector, "
                "initialised to ||W|| per row) rescales each row of W + scaling * B A; PEFT's use_dora.");
  s.add_string("lora_model_dir", "")
      .with_doc("A PEFT adapter folder (adapter_model.safetensors + adapter_config.json) to continue from; "
                "its r, lora_alpha, use_rslora and use_dora must equal this recipe's.");
  s.exclusive({"target_modules", "target_regex"});
  return s;
}

LoraOptions lora_options_from(const sdk::Options& options) {
  using O = LoraOptions;
  O o = sdk::read_fields<O>(
      options, {{"r", &O::r}, {"alpha", &O::alpha}, {"dropout", &O::dropout}, {"target_modules", &O::target_modules},
                {"target_parameters", &O::target_parameters}, {"target_regex", &O::target_regex}, {"exclude_modules", &O::exclude_modules},
                {"layers_to_transform", &O::layers_to_transform}, {"modules_to_save", &O::modules_to_save},
                {"fan_in_fan_out", &O::fan_in_fan_out}, {"use_rslora", &O::use_rslora}, {"use_dora", &O::use_dora},
                {"lora_model_dir", &O::lora_model_dir}});
  o.init = options.get_string("init") == "gaussian" ? LoraInit::Gaussian : LoraInit::Kaiming;
  if (o.r < 1) throw sdk::OptionError("r must be >= 1, got " + std::to_string(o.r));
  if (o.target_regex.empty() && o.target_modules.empty() && o.target_parameters.empty())
    throw sdk::OptionError(
        "target_modules is empty: name the Linear slots to adapt (e.g. [\"q_proj\", "
        "\"v_proj\"] or [\"all-linear\"]) or give target_regex or target_parameters");
  if (o.all_linear() || !o.target_regex.empty()) {
    if (!o.layers_to_transform.empty())
      throw sdk::OptionError(std::string("layers_to_transform cannot be used with ") +
                             (o.target_regex.empty() ? "target_modules = [\"all-linear\"]" : "target_regex") +
                             " (PEFT refuses it too): list the module names, e.g. target_modules = "
                             "[\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"gate_proj\", \"up_proj\", "
                             "\"down_proj\"]");
  }
  for (const auto& name : o.target_modules)
    if (name.empty()) throw sdk::OptionError("target_modules holds an empty name");
  for (const auto& name : o.target_parameters)
    if (name.empty()) throw sdk::OptionError("target_parameters holds an empty name");
  if (!o.target_parameters.empty()) check_parameter_lora_options(o);
  return o;
}

const char* const kFusedGateUpPattern = ".*\\.gate_up_proj";

void check_parameter_lora_options(const LoraOptions& o) {
  // PEFT's ParamWrapper.__init__ / update_layer raise for these.
  if (o.dropout != 0.0)
    throw sdk::OptionError("target_parameters (or all-linear on an MoE model) needs dropout = 0: PEFT's ParamWrapper "
                           "cannot apply dropout to the input of a parameter's update; got dropout = " +
                           std::to_string(o.dropout));
  if (o.use_dora)
    throw sdk::OptionError("target_parameters (or all-linear on an MoE model) does not work with use_dora = true "
                           "(PEFT's ParamWrapper refuses it too)");
  if (!o.layers_to_transform.empty())
    throw sdk::OptionError("target_parameters cannot be combined with layers_to_transform: name the layers in the "
                           "parameter names instead (e.g. \"model.layers.0.mlp.experts.down_proj\")");
}

namespace {

nlohmann::ordered_json list_or_null(const std::vector<std::string>& items) {
  return items.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(items);
}

// lora_alpha as an integer when it is one (PEFT's field is an int).
nlohmann::ordered_json alpha_json(double alpha) {
  if (alpha == std::floor(alpha) && std::abs(alpha) < 1e15) return static_cast<int64_t>(alpha);
  return alpha;
}

}  // namespace

std::string peft_config_json(const LoraOptions& o, const ResolvedTargets& targets) {
  nlohmann::ordered_json j;
  j["peft_type"] = "LORA";
  j["task_type"] = "CAUSAL_LM";
  j["base_model_name_or_path"] = nullptr;
  j["inference_mode"] = true;
  j["r"] = o.r;
  j["lora_alpha"] = alpha_json(o.alpha);
  j["lora_dropout"] = o.dropout;
  if (!o.target_regex.empty())
    j["target_modules"] = o.target_regex;
  else
    j["target_modules"] = list_or_null(targets.module_names);
  j["target_parameters"] = list_or_null(targets.parameter_names);
  j["exclude_modules"] = list_or_null(o.exclude_modules);
  j["layers_to_transform"] =
      o.layers_to_transform.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.layers_to_transform);
  j["layers_pattern"] = nullptr;
  j["modules_to_save"] = list_or_null(o.modules_to_save);
  j["fan_in_fan_out"] = false;  // see the fan_in_fan_out option: never true for Linear slots
  j["bias"] = "none";
  j["use_rslora"] = o.use_rslora;
  j["init_lora_weights"] = o.init == LoraInit::Gaussian ? nlohmann::ordered_json("gaussian") : nlohmann::ordered_json(true);
  j["use_dora"] = o.use_dora;
  j["lora_bias"] = false;
  j["rank_pattern"] = nlohmann::ordered_json::object();
  j["alpha_pattern"] = nlohmann::ordered_json::object();
  if (targets.fused_gate_up) {
    j["rank_pattern"][kFusedGateUpPattern] = 2 * o.r;
    j["alpha_pattern"][kFusedGateUpPattern] = alpha_json(2 * o.alpha);
  }
  return j.dump(2) + "\n";
}

bool check_peft_config_compatible(const std::string& config_file, const LoraOptions& o) {
  std::ifstream in(config_file);
  if (!in) throw std::runtime_error("lora_model_dir: cannot read " + config_file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error("lora_model_dir: " + config_file + " is not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& what) -> std::runtime_error {
    return std::runtime_error("lora_model_dir: " + config_file + ": " + what);
  };
  if (j.value("peft_type", std::string("LORA")) != "LORA")
    throw fail("peft_type is " + j.value("peft_type", std::string()) + ", expected LORA");
  if (j.contains("r") && j["r"].is_number() && j["r"].get<int64_t>() != o.r)
    throw fail("r is " + std::to_string(j["r"].get<int64_t>()) + ", the recipe says r = " + std::to_string(o.r));
  if (j.contains("lora_alpha") && j["lora_alpha"].is_number() && j["lora_alpha"].get<double>() != o.alpha) {
    std::ostringstream msg;
    msg << "lora_alpha is " << j["lora_alpha"].get<double>() << ", the recipe says alpha = " << o.alpha;
    throw fail(msg.str());
  }
  const bool rslora = j.contains("use_rslora") && j["use_rslora"].is_boolean() && j["use_rslora"].get<bool>();
  if (rslora != o.use_rslora)
    throw fail(std::string("use_rslora is ") + (rslora ? "true" : "false") + ", the recipe says " +
               (o.use_rslora ? "true" : "false"));
  // The one pattern ftcore writes too: PEFT's fused gate_up_proj (w1 + w3) at 2r / 2 alpha.
  bool fused_gate_up = false;
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (!j.contains(key) || !j[key].is_object() || j[key].empty()) continue;
    fused_gate_up = true;
    const double expected = std::string(key) == "rank_pattern" ? 2.0 * static_cast<double>(o.r) : 2.0 * o.alpha;
    const auto& pattern = j[key];
    if (pattern.size() != 1 || !pattern.contains(kFusedGateUpPattern) || !pattern[kFusedGateUpPattern].is_number() ||
        pattern[kFusedGateUpPattern].get<double>() != expected)
      throw fail(std::string(key) + " is " + pattern.dump() + "; per-module ranks and alphas are not supported "
                 "beyond PEFT's fused {\"" + kFusedGateUpPattern + "\": 2 x the base value}");
  }
  if (!o.all_linear() && j.contains("target_parameters")) {
    std::vector<std::string> theirs;
    if (j["target_parameters"].is_array())
      for (const auto& n : j["target_parameters"]) theirs.push_back(n.get<std::string>());
    std::vector<std::string> ours = o.target_parameters;
    std::sort(theirs.begin(), theirs.end());
    std::sort(ours.begin(), ours.end());
    if (theirs != ours) {
      auto text = [](const std::vector<std::string>& v) { return nlohmann::json(v).dump(); };
      throw fail("target_parameters is " + text(theirs) + ", the recipe says " + text(ours));
    }
  }
  const bool dora = j.contains("use_dora") && j["use_dora"].is_boolean() && j["use_dora"].get<bool>();
  if (dora != o.use_dora)
    throw fail(std::string("use_dora is ") + (dora ? "true" : "false") + ", the recipe says " +
               (o.use_dora ? "true" : "false"));
  return fused_gate_up;
}

}  // namespace ftcore::plugins::lora

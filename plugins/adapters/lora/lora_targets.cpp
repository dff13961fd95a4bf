// PEFT's module matching for adapter/lora (lora_targets.h), with errors that
// name what the model has when a name matches nothing.
#include "lora_targets.h"

#include <algorithm>
#include <regex>
#include <set>
#include <stdexcept>

namespace ftcore::plugins::lora {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// PEFT's list matching: the full path, or a path ending with "." + name.
bool matches_name(const std::string& path, const std::string& name) {
  return path == name || ends_with(path, "." + name);
}

std::string last_component(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

std::regex compile(const std::string& pattern, const std::string& what) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument(what + " \"" + pattern + "\" is not a valid regex: " + e.what());
  }
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

// The distinct last components of `paths`, first-seen order: what a user types.
std::vector<std::string> short_names_of(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const auto& p : paths) {
    std::string n = last_component(p);
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  return names;
}

std::string slots_hint(const std::vector<std::string>& linear_paths) {
  return "the model's Linear slots are named " + join(short_names_of(linear_paths)) + " (paths like " +
         (linear_paths.empty() ? std::string("?") : linear_paths.front()) + ")";
}

}  // namespace

int64_t layer_index_of(const std::string& path) {
  // PEFT: re.match(r".*?\.[^.]*\.(?P<idx>\d+)\.", key) -- the first all-digit
  // segment that has at least two segments before it and one after it.
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t dot; (dot = path.find('.', begin)) != std::string::npos; begin = dot + 1)
    parts.push_back(path.substr(begin, dot - begin));
  parts.push_back(path.substr(begin));
  for (size_t i = 2; i + 1 < parts.size(); ++i) {
    const std::string& s = parts[i];
    if (!s.empty() && s.size() < 18 && s.find_first_not_of("0123456789") == std::string::npos) return std::stoll(s);
  }
  return -1;
}

LoraTargets select_lora_targets(const std::vector<std::string>& linear_paths, int64_t num_layers,
                                const LoraOptions& o) {
  if (o.target_regex.empty() && o.target_modules.empty()) return {};  // target_parameters only
  for (const auto& name : o.exclude_modules)
    if (std::none_of(linear_paths.begin(), linear_paths.end(), [&](const auto& p) { return matches_name(p, name); }))
      throw std::invalid_argument("exclude_modules: \"" + name + "\" matches no Linear slot; " +
                                  slots_hint(linear_paths));
  for (int64_t layer : o.layers_to_transform)
    if (layer < 0 || layer >= num_layers)
      throw std::invalid_argument("layers_to_transform: layer " + std::to_string(layer) + " does not exist; the model has " +
                                  std::to_string(num_layers) + " layers (0.." + std::to_string(num_layers - 1) + ")");
  std::vector<std::regex> save_patterns;
  for (const auto& m : o.modules_to_save)
    save_patterns.push_back(compile("(^|.*\\.)" + m + "($|\\..*)", "modules_to_save name"));

  const bool use_regex = !o.target_regex.empty();
  const std::regex target_regex = use_regex ? compile(o.target_regex, "target_regex") : std::regex();
  // all-linear: PEFT collects every Linear and drops the output embedding.
  const std::string output_layer = "lm_head";
  if (!use_regex && !o.all_linear()) {
    for (const auto& name : o.target_modules) {
      if (std::any_of(linear_paths.begin(), linear_paths.end(), [&](const auto& p) { return matches_name(p, name); }))
        continue;
      std::string why = "target_modules: \"" + name + "\" matches no Linear slot";
      if (name == "embed_tokens" || ends_with(name, "norm"))
        why += " (LoRA adapts Linear slots only; train \"" + name + "\" in full with modules_to_save)";
      throw std::invalid_argument(why + "; " + slots_hint(linear_paths) + ", or use [\"all-linear\"]");
    }
  }

  LoraTargets out;
  bool regex_matched = false;
  for (const auto& path : linear_paths) {
    const bool excluded = std::any_of(o.exclude_modules.begin(), o.exclude_modules.end(),
                                      [&](const auto& name) { return matches_name(path, name); });
    if (excluded) continue;
    if (std::any_of(save_patterns.begin(), save_patterns.end(), [&](const auto& re) { return std::regex_match(path, re); }))
      continue;
    bool selected = false;
    if (use_regex) {
      selected = std::regex_match(path, target_regex);
      regex_matched |= selected;
    } else if (o.all_linear()) {
      selected = path != output_layer;
    } else if (std::find(o.target_modules.begin(), o.target_modules.end(), path) != o.target_modules.end()) {
      selected = true;  // PEFT: an exact path skips the layer filter
    } else if (std::any_of(o.target_modules.begin(), o.target_modules.end(),
                           [&](const auto& name) { return ends_with(path, "." + name); })) {
      selected = true;
      if (!o.layers_to_transform.empty()) {
        const int64_t layer = layer_index_of(path);
        selected = layer >= 0 && std::find(o.layers_to_transform.begin(), o.layers_to_transform.end(), layer) !=
                                     o.layers_to_transform.end();
      }
    }
    if (selected) out.paths.push_back(path);
  }
  if (use_regex && !regex_matched) {
    std::vector<std::string> some(linear_paths.begin(), linear_paths.begin() + std::min<size_t>(linear_paths.size(), 8));
    throw std::invalid_argument("target_regex \"" + o.target_regex +
                                "\" matches no Linear slot path (it must match the whole path); paths are: " +
                                join(some) + (linear_paths.size() > some.size() ? ", ..." : ""));
  }
  if (out.paths.empty())
    throw std::invalid_argument("no Linear slot is left to adapt: exclude_modules, layers_to_transform and "
                                "modules_to_save removed every slot the targets matched");
  out.short_names = short_names_of(out.paths);
  return out;
}

std::vector<std::string> peft_addressable_slots(const std::string& architecture,
                                                const std::vector<std::string>& linear_paths, const LoraOptions& o) {
  static const std::vector<std::string> qwen3_moe_mlp = {".mlp.gate_proj", ".mlp.up_proj", ".mlp.down_proj"};
  if (architecture != "Qwen3MoeForCausalLM") return linear_paths;
  const bool use_regex = !o.target_regex.empty();
  const std::regex target_regex = use_regex ? compile(o.target_regex, "target_regex") : std::regex();
  std::vector<std::string> kept;
  for (const auto& path : linear_paths) {
    if (std::none_of(qwen3_moe_mlp.begin(), qwen3_moe_mlp.end(), [&](const auto& s) { return ends_with(path, s); })) {
      kept.push_back(path);
      continue;
    }
    const bool named = use_regex ? std::regex_match(path, target_regex)
                                 : !o.all_linear() && std::any_of(o.target_modules.begin(), o.target_modules.end(),
                                                                  [&](const auto& n) { return matches_name(path, n); });
    if (named)
      throw std::invalid_argument(
          (use_regex ? "target_regex \"" + o.target_regex + "\"" : std::string("target_modules")) + " selects " +
          path + ", a dense MLP of a Qwen3-MoE model: PEFT reads gate_proj/up_proj/down_proj on " + architecture +
          " as the experts' fused parameters, so it could not load that adapter; adapt the experts with "
          "target_parameters = [\"gate_up_proj\", \"down_proj\"] and the attention with q_proj, k_proj, v_proj, o_proj");
  }
  return kept;
}

std::vector<ParameterTarget> select_parameter_targets(const std::vector<std::string>& parameter_paths,
                                                      const LoraOptions& o) {
  std::vector<std::string> names = o.target_parameters;
  const bool moe_all_linear = o.all_linear() && !parameter_paths.empty();
  if (moe_all_linear)
    for (const char* n : {"gate.weight", "gate_up_proj", "down_proj"})
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const auto& name : names)
    if (std::none_of(parameter_paths.begin(), parameter_paths.end(), [&](const auto& p) { return matches_name(p, name); }))
      throw std::invalid_argument(
          "target_parameters: \"" + name + "\" matches no adaptable parameter; " +
          (parameter_paths.empty() ? std::string("this model has none (only MoE models have: their routers' "
                                                 "mlp.gate.weight and experts' mlp.experts.gate_up_proj / down_proj)")
                                   : "the model's are named like " + join(std::vector<std::string>(
                                         parameter_paths.begin(), parameter_paths.begin() +
                                                                      std::min<size_t>(parameter_paths.size(), 3)))));
  std::vector<ParameterTarget> out;
  for (const auto& path : parameter_paths) {
    if (std::none_of(names.begin(), names.end(), [&](const auto& n) { return matches_name(path, n); })) continue;
    const bool fused = (moe_all_linear || o.gate_up_at_double_rank) && ends_with(path, ".gate_up_proj");  // PEFT's rank_pattern / alpha_pattern
    out.push_back({path, fused ? 2 * o.r : o.r, fused ? 2 * o.alpha : o.alpha});
  }
  return out;
}

SaveTargets select_modules_to_save(const std::vector<std::string>& linear_paths,
                                   const std::vector<std::string>& param_names, const LoraOptions& o) {
  SaveTargets out;
  if (o.modules_to_save.empty()) return out;
  const std::set<std::string> slots(linear_paths.begin(), linear_paths.end());
  // Modules that hold parameters directly, outside any Linear slot.
  std::vector<std::string> modules;
  for (const auto& name : param_names) {
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string module = name.substr(0, dot);
    const bool in_slot = std::any_of(slots.begin(), slots.end(), [&](const std::string& s) {
      return module == s || module.rfind(s + ".", 0) == 0;
    });
    if (!in_slot && std::find(modules.begin(), modules.end(), module) == modules.end()) modules.push_back(module);
  }
  for (const auto& name : o.modules_to_save) {
    bool found = false;
    for (const auto& path : linear_paths)  // PEFT's _set_trainable: key.endswith(name)
      if (ends_with(path, name)) {
        found = true;
        if (std::find(out.slots.begin(), out.slots.end(), path) == out.slots.end()) out.slots.push_back(path);
      }
    for (const auto& module : modules)
      if (ends_with(module, name)) {
        found = true;
        if (std::find(out.modules.begin(), out.modules.end(), module) == out.modules.end()) out.modules.push_back(module);
      }
    if (!found) {
      std::vector<std::string> all = short_names_of(modules);
      for (const auto& n : short_names_of(linear_paths)) all.push_back(n);
      throw std::invalid_argument("modules_to_save: \"" + name +
                                  "\" matches no module with parameters; the model's modules are named " + join(all));
    }
  }
  return out;
}

}  // namespace ftcore::plugins::lora

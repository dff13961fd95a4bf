// PEFT adapter_config.json -> adapter/lora options -> apply + load.
#include "peft_adapter.h"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "ftcore/safetensors.h"

namespace fs = std::filesystem;

namespace ftcore::cli {

namespace {

std::vector<std::string> string_list(const nlohmann::json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  return v.get<std::vector<std::string>>();
}

}  // namespace

std::shared_ptr<sdk::Adapter> apply_peft_adapter(const fs::path& dir, Model& model, const PluginRegistry& registry) {
  const fs::path config_path = dir / "adapter_config.json";
  std::ifstream in(config_path);
  if (!in) throw std::runtime_error(config_path.string() + " does not exist (not a PEFT adapter folder)");
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(config_path.string() + ": byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw std::runtime_error(config_path.string() + ": " + e.what());
  }
  const std::string type = config.value("peft_type", "");
  if (type != "LORA")
    throw std::runtime_error(config_path.string() + ": peft_type \"" + type + "\" is not supported (LORA is)");
  const RegistryEntry* entry = registry.find(sdk::ComponentKind::Adapter, "lora");
  if (!entry) throw std::runtime_error("the adapter/lora plugin is not installed (see `ftcore plugins`)");
  const bool dora = config.value("use_dora", false);
  if (dora && !entry->params->find("use_dora"))
    throw std::runtime_error(config_path.string() + ": use_dora = true needs DoRA, which this adapter/lora lacks");

  std::map<std::string, sdk::ParamValue> values;
  try {
    values["r"] = config.at("r").get<int64_t>();
    values["alpha"] = config.at("lora_alpha").get<double>();
    values["use_rslora"] = config.value("use_rslora", false);
    if (dora) values["use_dora"] = true;
    const nlohmann::json& targets = config.at("target_modules");
    if (targets.is_string()) {
      values["target_regex"] = targets.get<std::string>();
    } else {
      values["target_modules"] = string_list(targets);
    }
    if (config.contains("target_parameters") && !config["target_parameters"].is_null())
      values["target_parameters"] = string_list(config["target_parameters"]);
    if (config.contains("exclude_modules") && !config["exclude_modules"].is_null())
      values["exclude_modules"] = string_list(config["exclude_modules"]);
    if (config.contains("modules_to_save") && !config["modules_to_save"].is_null())
      values["modules_to_save"] = string_list(config["modules_to_save"]);
    if (config.contains("layers_to_transform") && !config["layers_to_transform"].is_null()) {
      const auto& layers = config["layers_to_transform"];
      values["layers_to_transform"] =
          layers.is_number() ? std::vector<int64_t>{layers.get<int64_t>()} : layers.get<std::vector<int64_t>>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(config_path.string() + ": " + e.what());
  }
  values["lora_model_dir"] = dir.string();
  auto adapter = registry.create_adapter(*entry, sdk::Options(entry->params, values));
  adapter->apply(model);
  // lora_model_dir: the weights come from the folder the adapter names.
  const fs::path weights = fs::path(adapter->initial_weights_dir()) / "adapter_model.safetensors";
  adapter->load(safetensors::File::open(weights)->read_all());
  return adapter;
}

}  // namespace ftcore::cli

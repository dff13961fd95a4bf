// Quantized HF folders: config.json's quantization_config names the method
// (transformers' BitsAndBytesConfig for 4-bit bitsandbytes, GPTQConfig for
// AutoGPTQ/GPTQModel checkpoints); each quantized Linear's tensors sit under
// its module path in the quantizer's names, everything else is dense.
#include <fstream>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <toml++/toml.h>

#include "ftcore/model_config.h"
#include "ftcore/quantized_model.h"
#include "ftcore/recipe.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

nlohmann::json read_config_json(const fs::path& model_dir) {
  const fs::path file = model_dir / "config.json";
  std::ifstream in(file);
  if (!in) throw ModelError(file.string() + ": cannot read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(file.string() + ": not valid JSON: " + e.what());
  }
}

// transformers' dtype names <-> the quantizers' compute_dtype / quant_storage choices.
const std::map<std::string, std::string>& hf_to_compute_dtype() {
  static const std::map<std::string, std::string> names = {
      {"bfloat16", "bf16"}, {"float16", "fp16"}, {"float32", "fp32"}};
  return names;
}

std::string compute_dtype_to_hf(const std::string& name) {
  for (const auto& [hf, ours] : hf_to_compute_dtype())
    if (ours == name) return hf;
  return name;
}

// Which quantizer reads the folder, and its options as a TOML table.
std::pair<std::string, toml::table> quantizer_for(const nlohmann::json& q, const fs::path& config_file) {
  const auto fail = [&](const std::string& what) {
    return ModelError(config_file.string() + ": quantization_config: " + what);
  };
  const std::string method = q.value("quant_method", std::string());
  toml::table options;
  if (method == "bitsandbytes") {
    if (!q.value("load_in_4bit", false))
      throw fail("only 4-bit bitsandbytes checkpoints (load_in_4bit) are supported, not LLM.int8");
    const std::string type = q.value("bnb_4bit_quant_type", std::string("fp4"));
    if (type != "nf4" && type != "fp4") throw fail("bnb_4bit_quant_type \"" + type + "\" is not nf4 or fp4");
    options.insert("double_quant", q.value("bnb_4bit_use_double_quant", false));
    const std::string compute = q.value("bnb_4bit_compute_dtype", std::string("float32"));
    auto it = hf_to_compute_dtype().find(compute);
    if (it == hf_to_compute_dtype().end()) throw fail("bnb_4bit_compute_dtype \"" + compute + "\" is not supported");
    options.insert("compute_dtype", it->second);
    if (q.contains("bnb_4bit_quant_storage")) {
      const std::string storage = q["bnb_4bit_quant_storage"].get<std::string>();  // "uint8", "bfloat16" ...
      auto named = hf_to_compute_dtype().find(storage);
      options.insert("quant_storage", named == hf_to_compute_dtype().end() ? storage : named->second);
    }
    return {type, options};
  }
  if (method == "gptq") {
    if (q.value("checkpoint_format", std::string("gptq")) != "gptq")
      throw fail("checkpoint_format \"" + q["checkpoint_format"].get<std::string>() +
                 "\" is not supported (only the AutoGPTQ \"gptq\" layout)");
    options.insert("bits", q.value("bits", int64_t{4}));
    options.insert("group_size", q.value("group_size", int64_t{128}));
    options.insert("desc_act", q.value("desc_act", false));
    options.insert("sym", q.value("sym", true));
    if (q.contains("damp_percent")) options.insert("damp_percent", q["damp_percent"].get<double>());
    return {"gptq", options};
  }
  throw fail("quant_method \"" + method + "\" is not supported (bitsandbytes 4-bit, gptq)");
}

// The tensor whose presence marks `path` as quantized in this format.
std::string marker_of(const std::string& quantizer, const std::string& path) {
  if (quantizer == "gptq") return path + ".qweight";
  return path + ".weight.quant_state.bitsandbytes__" + quantizer;
}

}  // namespace

bool is_quantized_folder(const fs::path& model_dir) {
  if (!fs::exists(model_dir / "config.json")) return false;
  return read_config_json(model_dir).contains("quantization_config");
}

QuantizedModel load_quantized_model(const fs::path& model_dir, const LoadOptions& options,
                                    const PluginRegistry& registry) {
  const fs::path config_file = model_dir / "config.json";
  nlohmann::json q;
  try {
    q = read_config_json(model_dir).at("quantization_config");
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(config_file.string() + ": no quantization_config");
  }
  std::pair<std::string, toml::table> choice;
  try {
    choice = quantizer_for(q, config_file);
  } catch (const nlohmann::json::exception& e) {
    throw ModelError(config_file.string() + ": quantization_config: " + e.what());
  }
  const auto& [name, table] = choice;
  const RegistryEntry* entry = registry.find(sdk::ComponentKind::Quantizer, name);
  if (!entry) throw ModelError(config_file.string() + ": needs quantizer/" + name + ", which is not installed");
  std::vector<Diagnostic> problems;
  auto values = validate_table(table, *entry->params, "quantization_config", {}, problems);
  if (!problems.empty()) throw ModelError(config_file.string() + ": quantization_config: " + problems.front().message);

  QuantizedModel out;
  out.quantizer_name = name;
  out.quantizer = registry.create_quantizer(*entry, sdk::Options(entry->params, values));
  ModelConfig config = read_model_config(model_dir);
  const auto tensors = read_model_tensors(model_dir);
  const c10::ScalarType dtype = options.dtype.value_or(config.dtype.value_or(at::kFloat));
  out.model = std::make_shared<Model>(std::move(config), at::TensorOptions().dtype(dtype).device(options.device));

  std::set<std::string> names;
  for (const auto& t : tensors) names.insert(t.first);
  std::set<std::string> consumed;
  int64_t quantized = 0;
  for (const std::string& path : out.model->linear_paths()) {
    if (!names.count(marker_of(name, path))) continue;
    sdk::TensorMap slot_tensors;
    at::Tensor bias;
    for (const auto& [tensor_name, tensor] : tensors) {
      if (tensor_name.rfind(path + ".", 0) != 0) continue;
      if (tensor_name == path + ".bias") {
        bias = tensor.to(options.device, dtype);
        continue;  // a parameter of the slot: load_weights fills it below
      }
      slot_tensors.add(tensor_name, tensor.to(options.device));
      consumed.insert(tensor_name);
    }
    sdk::QuantizedWeight weight;
    try {
      weight = out.quantizer->from_tensors(path, slot_tensors);
    } catch (const std::exception& e) {
      throw ModelError(model_dir.string() + ": " + path + ": " + e.what());
    }
    out.model->replace_linear(path, std::make_shared<QuantizedLinear>(out.quantizer, std::move(weight), bias));
    ++quantized;
  }
  if (quantized == 0)
    throw ModelError(model_dir.string() + ": config.json says " + name + ", but no tensor is stored as " + name +
                     " (looked for " + marker_of(name, "<module>") + ")");
  std::vector<std::pair<std::string, at::Tensor>> dense;
  for (const auto& t : tensors)
    if (!consumed.count(t.first)) dense.push_back(t);
  out.model->load_weights(dense, model_dir.string());
  for (const auto& p : out.model->named_parameters()) p.tensor.requires_grad_(false);
  return out;
}

sdk::TensorMap quantized_state_dict(const Model& model, c10::ScalarType dtype) {
  sdk::TensorMap out;
  for (const auto& p : model.named_parameters()) out.add(p.name, p.tensor.detach().to(at::kCPU, dtype).contiguous());
  for (const std::string& path : model.linear_paths()) {
    auto slot = std::dynamic_pointer_cast<QuantizedLinear>(model.linear(path));
    if (!slot) continue;
    for (auto& [name, tensor] : slot->quantizer().to_tensors(path, slot->weight()).tensors)
      out.add(name, tensor.to(at::kCPU).contiguous());
  }
  out.metadata["format"] = "pt";
  return out;
}

std::string quantization_config_json(const std::string& quantizer_name, const sdk::Options& options) {
  nlohmann::ordered_json q;
  const auto has = [&](const char* key) { return options.spec() && options.spec()->find(key); };
  if (quantizer_name == "gptq") {
    q["quant_method"] = "gptq";
    q["bits"] = options.get_int("bits");
    q["group_size"] = options.get_int("group_size");
    q["desc_act"] = options.get_bool("desc_act");
    q["sym"] = options.get_bool("sym");
    if (has("damp_percent")) q["damp_percent"] = options.get_float("damp_percent");
    q["checkpoint_format"] = "gptq";
  } else {
    q["quant_method"] = "bitsandbytes";
    q["load_in_4bit"] = true;
    q["load_in_8bit"] = false;
    q["bnb_4bit_quant_type"] = quantizer_name;
    q["bnb_4bit_use_double_quant"] = options.get_bool("double_quant");
    q["bnb_4bit_compute_dtype"] = compute_dtype_to_hf(options.get_string("compute_dtype"));
    if (has("quant_storage")) q["bnb_4bit_quant_storage"] = compute_dtype_to_hf(options.get_string("quant_storage"));
    q["llm_int8_skip_modules"] = nlohmann::ordered_json::array({"lm_head"});
  }
  return q.dump();
}

}  // namespace ftcore

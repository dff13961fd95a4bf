// `ftcore merge --model DIR --adapter DIR --out DIR [--dtype bf16|fp16|fp32] [--requantize]
//  [--max-shard-size SIZE] [--overwrite]`: folds a PEFT adapter into its base
// model (PEFT's merge_and_unload) and writes a complete HF folder that
// transformers' from_pretrained loads:
//
//   model.safetensors, or model-0000k-of-0000n.safetensors + model.safetensors.index.json
//     when the weights exceed --max-shard-size (default 5GB, transformers' default;
//     shards filled in parameter order, a tensor larger than the limit alone)
//   config.json (torch_dtype = the output dtype), generation_config.json,
//     tokenizer files (whichever the model folder has)
//
// The base is loaded in fp32 whatever its dtype, so W + scaling * B A is
// rounded once, to the output dtype (default: the checkpoint's). Tied
// embeddings stay tied (no lm_head.weight) unless the adapter trained a
// separate lm_head (modules_to_save), which unties them in config.json too.
// As a check it runs a few fixed sentences through the model before and
// after the merge and reports the largest |logit difference|. The folder is
// written as OUT.tmp and renamed into place: OUT is complete or absent.
//
// A quantized base (config.json's quantization_config: bitsandbytes 4-bit
// or GPTQ) loads through its quantizer plugin; the merge dequantizes every
// slot (adapted ones get W + scaling * B A), so the output is dense, and
// `--requantize` quantizes it again with the base's quantizer (nf4/fp4; GPTQ
// needs calibration: `ftcore quantize` the merged folder). Either way the
// command reports what that cost against the unmerged quantized model: the
// max |logit difference| and the mean per-token KL on the sample inputs.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <ATen/ATen.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "command_line.h"
#include "hf_folder.h"
#include "commands.h"
#include "ftcore/atomic_file.h"
#include "ftcore/model.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/quantized_model.h"
#include "ftcore/safetensors.h"
#include "ftcore/tokenizer.h"
#include "peft_adapter.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace ftcore::cli {

namespace {

// transformers' convert_file_size_to_int: "5GB" = 5e9 bytes, "2GiB" = 2^31,
// a bare number is bytes.
uint64_t parse_size(const std::string& text) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw po::error("--max-shard-size: '" + text + "' is not a size (e.g. 5GB, 500MB, 2GiB, 1000000)");
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, double> kUnits[] = {{"", 1.0},      {"B", 1.0},        {"KB", 1e3},
                                                          {"MB", 1e6},    {"GB", 1e9},       {"TB", 1e12},
                                                          {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
  for (const auto& [name, factor] : kUnits)
    if (unit == name) {
      if (!(value > 0.0)) throw po::error("--max-shard-size must be positive, got '" + text + "'");
      return static_cast<uint64_t>(value * factor);
    }
  throw po::error("--max-shard-size: unknown unit in '" + text + "' (B, KB, MB, GB, TB, KiB, MiB, GiB)");
}

// Mean over tokens of KL(softmax(a) || softmax(b)), in nats: how far the
// written model's next-token distributions moved from the unmerged model's.
double mean_kl(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double total = 0.0;
  int64_t tokens = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const at::Tensor la = a[i].to(at::kDouble).log_softmax(-1), lb = b[i].to(at::kDouble).log_softmax(-1);
    total += (la.exp() * (la - lb)).sum().item<double>();
    tokens += a[i].numel() / a[i].size(-1);
  }
  return tokens ? total / tokens : 0.0;
}

}  // namespace

int merge_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore merge --model DIR --adapter DIR --out DIR [--dtype bf16|fp16|fp32] [options]\n\n"
      "Merges a PEFT adapter into its base model (PEFT's merge_and_unload) and writes a complete HF\n"
      "folder (safetensors, sharded with an index when large; config.json; generation_config.json;\n"
      "tokenizer files) that transformers loads. Reports the largest |logit difference| between the\n"
      "merged and the unmerged model on a few sample sentences.\n\nOptions");
  std::string model_text, adapter_text, out_text, dtype_text = "auto", shard_text = "5GB";
  visible.add_options()("help,h", "show this help")("model", po::value(&model_text), "HF model folder (the base)")(
      "adapter", po::value(&adapter_text), "PEFT adapter folder (adapter_config.json + adapter_model.safetensors)")(
      "out", po::value(&out_text), "folder to write (absent or empty unless --overwrite)")(
      "dtype", po::value(&dtype_text), "bf16, fp16, fp32, or auto (default: the base checkpoint's)")(
      "max-shard-size", po::value(&shard_text), "largest weight file, e.g. 5GB (default), 500MB, 2GiB")(
      "overwrite", po::bool_switch(), "replace an existing --out folder")(
      "requantize", po::bool_switch(), "quantized base: re-quantize the merged weights with the base's quantizer");
  po::variables_map vm;
  if (!parse_options(args, visible, vm)) return kExitOk;
  for (const char* key : {"model", "adapter", "out"})
    if (!vm.count(key)) throw po::error(std::string("--") + key + " is required (see ftcore merge --help)");
  std::optional<c10::ScalarType> dtype;
  if (dtype_text != "auto") {
    if (dtype_text != "bf16" && dtype_text != "fp16" && dtype_text != "fp32")
      throw po::error("--dtype must be bf16, fp16, fp32 or auto, got '" + dtype_text + "'");
    dtype = parse_dtype_name(dtype_text);
  }
  const uint64_t max_shard_bytes = parse_size(shard_text);
  const fs::path model_dir(model_text), adapter_dir(adapter_text), out(out_text);
  if (!fs::is_directory(model_dir)) throw po::error("--model: " + model_text + " is not a folder");
  if (!fs::exists(model_dir / "config.json")) throw po::error("--model: " + model_text + " has no config.json");
  if (!fs::is_directory(adapter_dir)) throw po::error("--adapter: " + adapter_text + " is not a folder");
  for (const char* name : {"adapter_config.json", "adapter_model.safetensors"})
    if (!fs::exists(adapter_dir / name))
      throw po::error("--adapter: " + adapter_text + " has no " + name + " (not a PEFT adapter folder)");
  check_output_folder(out, "--out", vm["overwrite"].as<bool>(), {model_dir, adapter_dir});

  const ModelConfig config = read_model_config(model_dir);
  const bool quantized_base = is_quantized_folder(model_dir);
  if (vm["requantize"].as<bool>() && !quantized_base)
    throw po::error("--requantize applies to quantized bases; " + model_text + " is not quantized");
  const c10::ScalarType out_dtype = dtype.value_or(config.dtype.value_or(at::kFloat));
  // Declared before the model: the adapter's modules run code of the plugin
  // library the registry keeps loaded.
  PluginRegistry registry;
  std::shared_ptr<sdk::Adapter> adapter;
  load_plugins(PluginSearchOptions{}, registry);
  LoadOptions load;
  load.dtype = at::kFloat;
  QuantizedModel base;
  if (quantized_base) {
    base = load_quantized_model(model_dir, load, registry);
    spdlog::info("quantized base ({}): dequantized to fp32 for the merge", base.quantizer_name);
  } else {
    base.model = Model::from_pretrained(model_dir, load);
  }
  const std::shared_ptr<Model>& model = base.model;
  adapter = apply_peft_adapter(adapter_dir, *model, registry);

  const std::vector<at::Tensor> inputs = sample_inputs(model_dir, config.vocab_size);
  const std::vector<at::Tensor> unmerged = logits_of(*model, inputs);
  adapter->merge(*model);
  if (quantized_base) dequantize_model(*model, at::kFloat);
  const std::vector<at::Tensor> merged = logits_of(*model, inputs);
  const double merged_difference = max_abs_difference(unmerged, merged);
  std::optional<double> written_difference, written_kl;
  if (vm["requantize"].as<bool>()) {
    if (base.quantizer->needs_calibration())
      throw po::error("--requantize: " + base.quantizer_name +
                      " needs calibration activations; re-quantize the merged folder with `ftcore quantize`");
    quantize_model(*model, base.quantizer, {});
    const std::vector<at::Tensor> requantized = logits_of(*model, inputs);
    written_difference = max_abs_difference(unmerged, requantized);
    written_kl = mean_kl(unmerged, requantized);
  } else if (out_dtype != at::kFloat) {
    model->module().to(out_dtype);
    const std::vector<at::Tensor> written = logits_of(*model, inputs);
    written_difference = max_abs_difference(unmerged, written);
    written_kl = mean_kl(unmerged, written);
  }

  sdk::TensorMap weights;
  bool untied = false;
  std::function<void(nlohmann::ordered_json&)> edit_config;
  if (vm["requantize"].as<bool>()) {
    weights = quantized_state_dict(*model, out_dtype);
    const std::string q = nlohmann::ordered_json::parse(std::ifstream(model_dir / "config.json"))
                              .at("quantization_config").dump();
    edit_config = [q](nlohmann::ordered_json& c) { c["quantization_config"] = nlohmann::ordered_json::parse(q); };
  } else {
    for (const auto& p : model->named_parameters()) {
      if (p.name == "lm_head.weight" && config.tie_word_embeddings) untied = true;  // a trained lm_head copy
      weights.add(p.name, p.tensor.detach().to(at::kCPU, out_dtype).contiguous());
    }
    if (untied) spdlog::warn("the adapter trains lm_head apart from embed_tokens: writing both, tie_word_embeddings = false");
    edit_config = [](nlohmann::ordered_json& c) { c.erase("quantization_config"); };
  }

  std::vector<std::string> files;
  write_folder_atomically(out, [&](const fs::path& tmp) {
    files = write_folder(tmp, model_dir, weights, max_shard_bytes, out_dtype, untied, edit_config);
  });
  int64_t tokens = 0;
  for (const at::Tensor& ids : inputs) tokens += ids.numel();
  std::cout << "merged " << adapter_text << " into " << model_text << "\n"
            << "max |logit difference| merged vs unmerged (fp32" << (quantized_base ? ", base dequantized" : "")
            << ", " << inputs.size() << " inputs, " << tokens << " tokens): " << merged_difference
            << "; mean KL(unmerged || merged) per token: " << mean_kl(unmerged, merged) << "\n";
  if (written_difference)
    std::cout << "max |logit difference| as written ("
              << (vm["requantize"].as<bool>() ? "re-quantized " + base.quantizer_name : dtype_display_name(out_dtype))
              << ") vs unmerged: " << *written_difference << "; mean KL per token: " << *written_kl << "\n";
  std::cout << "wrote " << out.string() << ": " << files.size() << " weight file" << (files.size() > 1 ? "s" : "")
            << ", " << weights.tensors.size() << " tensors, " << hf_dtype_name(out_dtype) << "\n";
  return kExitOk;
}

}  // namespace ftcore::cli

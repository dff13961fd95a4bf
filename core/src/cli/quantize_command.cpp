// `ftcore quantize --model DIR --quantizer nf4|fp4|gptq [--set key=value]...
//  --out DIR [--calibration-data FILE] [--samples N] [--sequence-len L]
//  [--seed S] [--dtype auto|bf16|fp16|fp32] [--overwrite]`
//
// Quantizes every Linear but lm_head and writes an HF folder that
// transformers loads (bitsandbytes 4-bit or GPTQ quantization_config) and
// that `ftcore run`/`generate`/`merge` load as a quantized base. GPTQ needs
// calibration text: --calibration-data is a .txt file (one text per line)
// or JSONL with a "text" field; its tokens are concatenated and
// --samples rows of --sequence-len tokens are drawn with --seed, as GPTQ's
// tooling cuts a corpus. The command reports bytes per quantized weight and
// the logit error the quantization introduced on sample sentences.
#include <chrono>
#include <fstream>
#include <iostream>

#include <ATen/ATen.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "command_line.h"
#include "commands.h"
#include "ftcore/atomic_file.h"
#include "ftcore/model.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/quantized_model.h"
#include "ftcore/recipe.h"
#include "ftcore/tokenizer.h"
#include "hf_folder.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace ftcore::cli {

namespace {


// The texts of a .txt (one per line) or .jsonl ("text" field) file.
std::vector<std::string> read_texts(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw po::error("--calibration-data: cannot read " + file.string());
  const bool jsonl = file.extension() == ".jsonl" || file.extension() == ".json";
  std::vector<std::string> texts;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (!jsonl) {
      texts.push_back(line);
      continue;
    }
    try {
      texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      throw po::error(file.string() + ":" + std::to_string(number) + ": not a JSON object with a \"text\" string (" +
                      e.what() + ")");
    }
  }
  if (texts.empty()) throw po::error("--calibration-data: " + file.string() + " holds no text");
  return texts;
}

}  // namespace

int quantize_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore quantize --model DIR --quantizer nf4|fp4|gptq --out DIR [options]\n\n"
      "Quantizes every Linear but lm_head and writes an HF folder (bitsandbytes 4-bit or GPTQ layout)\n"
      "that transformers and ftcore load. GPTQ needs --calibration-data.\n\nOptions");
  std::string model_text, quantizer_name, out_text, calibration_text, dtype_text = "auto";
  std::vector<std::string> sets;
  int64_t samples = 128, sequence_len = 512;
  uint64_t seed = 0;
  visible.add_options()("help,h", "show this help")("model", po::value(&model_text), "HF model folder")(
      "quantizer", po::value(&quantizer_name), "quantizer plugin: nf4, fp4, gptq")(
      "set", po::value(&sets)->composing(), "quantizer option, key=value in TOML (repeatable)")(
      "out", po::value(&out_text), "folder to write (absent or empty unless --overwrite)")(
      "calibration-data", po::value(&calibration_text), "calibration text: .txt (a text per line) or .jsonl (\"text\")")(
      "samples", po::value(&samples), "calibration rows (default 128)")(
      "sequence-len", po::value(&sequence_len), "tokens per calibration row (default 512)")(
      "seed", po::value(&seed), "seed for drawing calibration rows (default 0)")(
      "dtype", po::value(&dtype_text), "dtype of the unquantized tensors: bf16, fp16, fp32, auto (the checkpoint's)")(
      "overwrite", po::bool_switch(), "replace an existing --out folder");
  po::variables_map vm;
  if (!parse_options(args, visible, vm)) return kExitOk;
  for (const char* key : {"model", "quantizer", "out"})
    if (!vm.count(key)) throw po::error(std::string("--") + key + " is required (see ftcore quantize --help)");
  const fs::path model_dir(model_text), out(out_text);
  if (!fs::exists(model_dir / "config.json")) throw po::error("--model: " + model_text + " has no config.json");
  if (is_quantized_folder(model_dir)) throw po::error("--model: " + model_text + " is already quantized");
  check_output_folder(out, "--out", vm["overwrite"].as<bool>(), {model_dir});

  PluginRegistry registry;  // before the model: the quantized slots run the plugin's code
  load_plugins(PluginSearchOptions{}, registry);
  const RegistryEntry* entry = registry.find(sdk::ComponentKind::Quantizer, quantizer_name);
  if (!entry) {
    std::vector<std::string> names;
    for (const RegistryEntry* e : registry.entries(sdk::ComponentKind::Quantizer)) names.push_back(e->name);
    throw po::error("--quantizer: no quantizer plugin \"" + quantizer_name + "\"" +
                    (names.empty() ? std::string(" (none installed)") : ", installed: " + join(names, ", ")));
  }
  const sdk::Options options = options_from_assignments(*entry, sets, "[quantizer]");
  std::shared_ptr<sdk::Quantizer> quantizer;
  try {
    quantizer = registry.create_quantizer(*entry, options);
  } catch (const std::exception& e) {  // the plugin refused an option value
    throw po::error(std::string("--set: ") + e.what());
  }

  LoadOptions load;
  if (dtype_text != "auto") load.dtype = parse_dtype_name(dtype_text);
  auto model = Model::from_pretrained(model_dir, load);
  std::vector<at::Tensor> calibration;
  if (quantizer->needs_calibration()) {
    if (calibration_text.empty())
      throw po::error("--quantizer " + quantizer_name + " needs calibration text: give --calibration-data FILE");
    auto tokenizer = Tokenizer::from_folder(model_dir);
    std::vector<std::vector<int64_t>> rows;
    for (const std::string& text : read_texts(calibration_text)) {
      const std::vector<int32_t> ids = tokenizer->encode(text, /*add_special_tokens=*/false);
      rows.emplace_back(ids.begin(), ids.end());
    }
    calibration = calibration_rows(rows, samples, sequence_len, seed);
  } else if (!calibration_text.empty()) {
    spdlog::warn("--calibration-data is ignored: {} needs no calibration", quantizer_name);
  }

  const std::vector<at::Tensor> inputs = sample_inputs(model_dir, model->config().vocab_size);
  const std::vector<at::Tensor> before = logits_of(*model, inputs);
  const auto start = std::chrono::steady_clock::now();
  const QuantizationSummary summary = quantize_model(*model, quantizer, calibration);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<at::Tensor> after = logits_of(*model, inputs);

  const c10::ScalarType dtype = model->dtype();
  const sdk::TensorMap weights = quantized_state_dict(*model, dtype);
  const nlohmann::ordered_json q = nlohmann::ordered_json::parse(quantization_config_json(quantizer_name, options));
  write_folder_atomically(out, [&](const fs::path& tmp) {
    write_folder(tmp, model_dir, weights, /*max_shard_bytes=*/5'000'000'000ULL, dtype, /*untied=*/false,
                 [&](nlohmann::ordered_json& config) { config["quantization_config"] = q; });
  });
  std::cout << "quantized " << summary.slots << " Linear slots (" << summary.parameters << " weights) with "
            << quantizer_name << " in " << seconds << " s: " << summary.bytes_per_parameter()
            << " bytes per quantized weight\n"
            << "max |logit difference| quantized vs " << dtype_display_name(dtype) << " (" << inputs.size()
            << " sample inputs): " << max_abs_difference(before, after) << "\n"
            << "wrote " << out.string() << "\n";
  return kExitOk;
}

}  // namespace ftcore::cli

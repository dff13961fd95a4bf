// `ftcore merge --model DIR --adapter DIR --out DIR [--dtype bf16|fp16|fp32]
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
#include "commands.h"
#include "ftcore/model.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/safetensors.h"
#include "ftcore/tokenizer.h"
#include "peft_adapter.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace ftcore::cli {

namespace {

// Files besides the weights that make the folder complete, copied when present.
const char* const kCopiedFiles[] = {"generation_config.json", "tokenizer.json",    "tokenizer_config.json",
                                    "special_tokens_map.json", "chat_template.jinja", "added_tokens.json",
                                    "vocab.json",              "merges.txt",          "tokenizer.model"};

// Sample inputs for the before/after check: short sentences of different lengths.
const char* const kSampleTexts[] = {
    "The quick brown fox jumps over the lazy dog.",
    "Question: what is the capital of France? Answer:",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
};

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

std::string hf_dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: return "float32";
  }
}

std::vector<at::Tensor> sample_inputs(const fs::path& model_dir, int64_t vocab_size) {
  std::vector<at::Tensor> inputs;
  if (fs::exists(model_dir / "tokenizer.json")) {
    auto tokenizer = Tokenizer::from_folder(model_dir);
    for (const char* text : kSampleTexts) {
      std::vector<int32_t> ids = tokenizer->encode(text, /*add_special_tokens=*/true);
      std::vector<int64_t> ids64(ids.begin(), ids.end());
      bool fits = !ids64.empty();
      for (int64_t id : ids64) fits = fits && id >= 0 && id < vocab_size;
      if (fits) inputs.push_back(at::tensor(ids64, at::kLong).unsqueeze(0));
    }
  }
  if (inputs.empty())  // no tokenizer (or ids beyond the model's vocabulary): fixed ids
    for (int64_t length : {7, 16, 29})
      inputs.push_back(at::arange(length, at::kLong).mul(7919).add(3).remainder(vocab_size).unsqueeze(0));
  return inputs;
}

std::vector<at::Tensor> logits_of(Model& model, const std::vector<at::Tensor>& inputs) {
  at::NoGradGuard no_grad;
  model.module().eval();
  std::vector<at::Tensor> out;
  for (const at::Tensor& ids : inputs) {
    ForwardInput f;
    f.input_ids = ids;
    out.push_back(model.forward(f).to(at::kFloat));
  }
  return out;
}

double max_abs_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

// Greedy shards in parameter order, as huggingface_hub's split_torch_state_dict_into_shards.
std::vector<sdk::TensorMap> split_shards(const sdk::TensorMap& weights, uint64_t max_bytes) {
  std::vector<sdk::TensorMap> shards(1);
  uint64_t used = 0;
  for (const auto& [name, tensor] : weights.tensors) {
    const uint64_t bytes = tensor.numel() * tensor.element_size();
    if (!shards.back().tensors.empty() && used + bytes > max_bytes) {
      shards.emplace_back();
      used = 0;
    }
    shards.back().add(name, tensor);
    used += bytes;
  }
  for (auto& shard : shards) shard.metadata["format"] = "pt";
  return shards;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string shard_name(size_t index, size_t count) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buffer;
}

// Writes the folder under `tmp`; returns the weight files' names.
std::vector<std::string> write_folder(const fs::path& tmp, const fs::path& model_dir, const sdk::TensorMap& weights,
                                      uint64_t max_shard_bytes, c10::ScalarType dtype, bool untied) {
  fs::create_directories(tmp);
  const std::vector<sdk::TensorMap> shards = split_shards(weights, max_shard_bytes);
  std::vector<std::string> files;
  if (shards.size() == 1) {
    files.push_back("model.safetensors");
    safetensors::write_file(tmp / files.back(), shards.front());
  } else {
    nlohmann::ordered_json index;
    uint64_t total = 0;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      files.push_back(shard_name(i, shards.size()));
      safetensors::write_file(tmp / files.back(), shards[i]);
      for (const auto& [name, tensor] : shards[i].tensors) {
        weight_map[name] = files.back();
        total += tensor.numel() * tensor.element_size();
      }
    }
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = weight_map;
    write_text(tmp / "model.safetensors.index.json", index.dump(2) + "\n");
  }
  std::ifstream in(model_dir / "config.json");
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in);
  config["torch_dtype"] = hf_dtype_name(dtype);
  if (config.contains("dtype")) config["dtype"] = hf_dtype_name(dtype);  // transformers >= 4.56 spelling
  if (untied) config["tie_word_embeddings"] = false;
  write_text(tmp / "config.json", config.dump(2) + "\n");
  for (const char* name : kCopiedFiles)
    if (fs::exists(model_dir / name)) fs::copy_file(model_dir / name, tmp / name, fs::copy_options::overwrite_existing);
  return files;
}

// OUT.tmp -> OUT; an existing OUT (--overwrite) is moved aside first and
// removed only once the new folder is in place.
void move_into_place(const fs::path& tmp, const fs::path& out) {
  if (fs::exists(out)) {
    const fs::path old = out.string() + ".old";
    fs::remove_all(old);
    fs::rename(out, old);
    fs::rename(tmp, out);
    fs::remove_all(old);
  } else {
    fs::rename(tmp, out);
  }
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
      "out", po::value(&out_text), "folder to write (must not exist unless --overwrite)")(
      "dtype", po::value(&dtype_text), "bf16, fp16, fp32, or auto (default: the base checkpoint's)")(
      "max-shard-size", po::value(&shard_text), "largest weight file, e.g. 5GB (default), 500MB, 2GiB")(
      "overwrite", po::bool_switch(), "replace an existing --out folder");
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
  if (fs::exists(out) && !vm["overwrite"].as<bool>())
    throw po::error("--out: " + out_text + " exists; pass --overwrite to replace it");
  const auto same = [](const fs::path& a, const fs::path& b) { return fs::exists(a) && fs::equivalent(a, b); };
  if (same(out, model_dir) || same(out, adapter_dir)) throw po::error("--out must differ from --model and --adapter");

  const ModelConfig config = read_model_config(model_dir);
  const c10::ScalarType out_dtype = dtype.value_or(config.dtype.value_or(at::kFloat));
  // Declared before the model: the adapter's modules run code of the plugin
  // library the registry keeps loaded.
  PluginRegistry registry;
  std::shared_ptr<sdk::Adapter> adapter;
  LoadOptions load;
  load.dtype = at::kFloat;
  auto model = Model::from_pretrained(model_dir, load);
  load_plugins(PluginSearchOptions{}, registry);
  adapter = apply_peft_adapter(adapter_dir, *model, registry);

  const std::vector<at::Tensor> inputs = sample_inputs(model_dir, config.vocab_size);
  const std::vector<at::Tensor> unmerged = logits_of(*model, inputs);
  adapter->merge(*model);
  const double merged_difference = max_abs_difference(unmerged, logits_of(*model, inputs));
  std::optional<double> written_difference;
  if (out_dtype != at::kFloat) {
    model->module().to(out_dtype);
    written_difference = max_abs_difference(unmerged, logits_of(*model, inputs));
  }

  sdk::TensorMap weights;
  bool untied = false;
  for (const auto& p : model->named_parameters()) {
    if (p.name == "lm_head.weight" && config.tie_word_embeddings) untied = true;  // a trained lm_head copy
    weights.add(p.name, p.tensor.detach().to(at::kCPU, out_dtype).contiguous());
  }
  if (untied) spdlog::warn("the adapter trains lm_head apart from embed_tokens: writing both, tie_word_embeddings = false");

  const fs::path tmp = out.string() + ".tmp";
  std::vector<std::string> files;
  try {
    fs::remove_all(tmp);
    files = write_folder(tmp, model_dir, weights, max_shard_bytes, out_dtype, untied);
    move_into_place(tmp, out);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
  int64_t tokens = 0;
  for (const at::Tensor& ids : inputs) tokens += ids.numel();
  std::cout << "merged " << adapter_text << " into " << model_text << "\n"
            << "max |logit difference| merged vs unmerged (fp32, " << inputs.size() << " inputs, " << tokens
            << " tokens): " << merged_difference << "\n";
  if (written_difference)
    std::cout << "max |logit difference| as written (" << dtype_display_name(out_dtype)
              << ") vs unmerged fp32: " << *written_difference << "\n";
  std::cout << "wrote " << out.string() << ": " << files.size() << " weight file" << (files.size() > 1 ? "s" : "")
            << ", " << weights.tensors.size() << " tensors, " << hf_dtype_name(out_dtype) << "\n";
  return kExitOk;
}

}  // namespace ftcore::cli

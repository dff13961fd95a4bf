// The files a recipe reads: where their paths point, and whether they are
// there and of the right kind, checked by validation so that `validate` says
// what `run` would before anything heavy loads.
//
// A relative input path is relative to the recipe file that wrote it (as
// [plugins] paths are), so a recipe runs the same from any folder; a --set
// value is relative to the working folder, where the user typed it. Outputs
// (output_dir, dataset_prepared_path) and resume_from_checkpoint, which lives
// under output_dir, stay relative to the working folder.
#include <fstream>

#include "ftcore/model_config.h"
#include "ftcore/recipe.h"
#include "recipe_internal.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

struct InputKey {
  const char* section;
  const char* key;
};

constexpr InputKey kInputPaths[] = {{"model", "path"}, {"model", "tokenizer_path"}, {"data", "path"}};

bool written_by_set(const toml::node& node) {
  const auto& file = node.source().path;
  return !file || file->rfind("--set", 0) == 0;
}

toml::value<std::string>* string_at(toml::table& root, const InputKey& k) {
  toml::table* section = root[k.section].as_table();
  return section ? section->get_as<std::string>(k.key) : nullptr;
}

const toml::value<std::string>* string_at(const toml::table& root, const InputKey& k) {
  const toml::table* section = root[k.section].as_table();
  return section ? section->get_as<std::string>(k.key) : nullptr;
}

class InputChecker {
 public:
  InputChecker(const toml::table& root, std::vector<Diagnostic>& diagnostics)
      : root_(root), diagnostics_(diagnostics) {}

  void model_folder() {
    const auto* node = string_at(root_, {"model", "path"});
    if (!node) return;
    const fs::path path(node->get());
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      if (!fs::is_regular_file(path / "config.json", ec))
        return report(*node, "not an HF model folder (no config.json): " + path.string());
      model_limits(*node, path);
    } else if (fs::is_regular_file(path, ec)) {
      if (path.extension() != ".gguf")
        report(*node, "the model must be an HF folder or a .gguf file: " + path.string());
    } else {
      report(*node, "model not found: " + path.string());
    }
  }

  void tokenizer_folder() {
    const auto* node = string_at(root_, {"model", "tokenizer_path"});
    if (!node) return;
    const fs::path path(node->get());
    std::error_code ec;
    if (!fs::is_directory(path, ec)) return report(*node, "tokenizer folder not found: " + path.string());
    if (!fs::is_regular_file(path / "tokenizer.json", ec))
      report(*node, "no tokenizer.json in the tokenizer folder " + path.string());
  }

  void data_file() {
    const auto* node = string_at(root_, {"data", "path"});
    if (!node) return;
    const fs::path path(node->get());
    std::error_code ec;
    if (fs::is_directory(path, ec)) return report(*node, "the data path is a folder, not a JSONL or JSON file: " + path.string());
    if (!fs::is_regular_file(path, ec)) return report(*node, "data file not found: " + path.string());
    if (fs::file_size(path, ec) == 0) return report(*node, "the data file is empty: " + path.string());
    if (!std::ifstream(path, std::ios::binary)) report(*node, "cannot read the data file " + path.string());
  }

 private:
  // A sequence_len the model cannot attend over fails only at the first
  // allocation, with libtorch's words; the default is cut to fit silently
  // nowhere, so only a length the user chose is held against the model.
  void model_limits(const toml::value<std::string>& path_node, const fs::path& folder) {
    ModelConfig config;
    try {
      config = read_model_config(folder);
    } catch (const ModelError& e) {
      return report(path_node, e.what());
    }
    const toml::table* data = root_["data"].as_table();
    const toml::node* length = data ? data->get("sequence_len") : nullptr;
    const auto value = length ? length->value_exact<int64_t>() : std::nullopt;
    if (value && config.max_position_embeddings > 0 && *value > config.max_position_embeddings)
      report(*length, "sequence_len = " + std::to_string(*value) + " in [data] is longer than the model's " +
                          std::to_string(config.max_position_embeddings) + " positions (max_position_embeddings in " +
                          (folder / "config.json").string() + ")");
  }

  void report(const toml::node& at, const std::string& message) { diagnostics_.push_back({source_of(at), message}); }

  const toml::table& root_;
  std::vector<Diagnostic>& diagnostics_;
};

}  // namespace

void resolve_input_paths(toml::table& root) {
  for (const InputKey& k : kInputPaths) {
    toml::value<std::string>* node = string_at(root, k);
    if (!node || node->get().empty() || written_by_set(*node)) continue;
    const fs::path path(node->get());
    if (path.is_relative()) node->get() = (fs::path(*node->source().path).parent_path() / path).lexically_normal().string();
  }
}

void check_recipe_inputs(const toml::table& root, std::vector<Diagnostic>& diagnostics) {
  InputChecker check(root, diagnostics);
  check.model_folder();
  check.tokenizer_folder();
  check.data_file();
}

}  // namespace ftcore

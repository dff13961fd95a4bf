// recipe.lock.toml contents.
#include "run_folder.h"

#include <set>
#include <sstream>

#include "ftcore/build_info.h"
#include "ftcore/hash.h"
#include "ftcore/runtime.h"

namespace fs = std::filesystem;

namespace ftcore::train {

std::string lock_file_text(const Recipe& recipe, const PreparedData& data, const fs::path& model_dir,
                           const std::string& sampler_name) {
  std::ostringstream out;
  out << recipe.lock_toml();
  // The build's versions, not version_info(): that loads the CUDA runtime to answer its CUDA questions.
  out << "\n# provenance\n";
  out << "# ftcore = " << build_info::kVersion << "\n# libtorch = " << build_info::kTorchVersion << "\n";
  std::set<fs::path> libraries;
  for (const ComponentConfig* c : recipe.components()) {
    const fs::path lib = c->entry->library_path();
    out << "# plugin " << c->section << "/" << c->entry->name << " = " << c->entry->library_version();
    if (!lib.empty()) out << " sha256:" << sha256_file(lib) << " " << lib.string();
    out << "\n";
  }
  if (!recipe.sampler) out << "# sampler = " << sampler_name << " (default)\n";
  const fs::path config = model_dir / "config.json";
  if (fs::exists(config)) out << "# model config.json sha256:" << sha256_file(config) << "\n";
  const fs::path data_file = recipe.data.get_string("path");
  if (fs::exists(data_file)) out << "# dataset " << data_file.string() << " sha256:" << sha256_file(data_file) << "\n";
  out << "# dataset cache key " << data.cache_key << " (" << data.train.size() << " train, "
      << data.validation.size() << " validation examples)\n";
  return out.str();
}

std::string lock_settings(const std::string& lock_text) {
  std::istringstream in(lock_text);
  std::string line, out;
  while (std::getline(in, line))
    // resume_from_checkpoint and run placement do not change what is trained.
    if (!line.empty() && line[0] != '#' && line.rfind("resume_from_checkpoint", 0) != 0 &&
        line.rfind("output_dir", 0) != 0)
      out += line + "\n";
  return out;
}

}  // namespace ftcore::train

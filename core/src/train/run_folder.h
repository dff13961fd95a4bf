// recipe.lock.toml: the recipe with every key resolved (runnable as it is:
// `ftcore run runs/<name>/recipe.lock.toml`), followed by provenance as
// comment lines: ftcore and libtorch versions, each plugin library's version
// and sha256, the model's config.json sha256 and the dataset's file sha256
// and cache key. Two runs compare with a diff of their lock files.
#pragma once

#include <filesystem>
#include <string>

#include "ftcore/dataset.h"
#include "ftcore/recipe.h"

namespace ftcore::train {

std::string lock_file_text(const Recipe& recipe, const PreparedData& data, const std::filesystem::path& model_dir,
                           const std::string& sampler_name);

// The settings part of a lock file (comments and blank lines dropped): what
// a resumed run compares to warn that the recipe changed.
std::string lock_settings(const std::string& lock_text);

}  // namespace ftcore::train

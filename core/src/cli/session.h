// What several subcommands share: loading plugins for a recipe (recipe
// [plugins] paths and --plugin-path first) and printing located errors.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/registry.h"

namespace ftcore::cli {

struct LoadedRecipe {
  PluginRegistry registry;
  PluginLoadReport plugins;
  Recipe recipe;
};

// Parses, merges, loads plugins and validates; throws ConfigError.
std::unique_ptr<LoadedRecipe> load_and_validate(const std::filesystem::path& path,
                                                const std::vector<std::string>& overrides,
                                                const std::vector<std::string>& plugin_paths);

void print_diagnostics(std::ostream& out, const std::vector<Diagnostic>& diagnostics);

}  // namespace ftcore::cli

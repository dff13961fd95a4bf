// Recipe + plugins loading shared by `run` and `validate`.
#include "session.h"

#include <ostream>

namespace ftcore::cli {

std::unique_ptr<LoadedRecipe> load_and_validate(const std::filesystem::path& path,
                                                const std::vector<std::string>& overrides,
                                                const std::vector<std::string>& plugin_paths) {
  toml::table table = load_recipe_table(path, overrides);
  PluginSearchOptions search;
  for (const auto& p : plugin_paths) search.explicit_paths.emplace_back(p);
  for (const auto& p : recipe_plugin_paths(table)) search.explicit_paths.push_back(p);
  auto loaded = std::make_unique<LoadedRecipe>();
  loaded->plugins = load_plugins(search, loaded->registry);
  try {
    loaded->recipe = validate_recipe(table, path, loaded->registry);
  } catch (ConfigError& e) {
    // A refused library may be why a name is unknown: say so next to the errors.
    std::vector<Diagnostic> all = e.diagnostics();
    for (const auto& r : loaded->plugins.refused) all.push_back({{r.path.string(), 0, 0}, "note: " + r.reason});
    throw ConfigError(std::move(all));
  }
  return loaded;
}

void print_diagnostics(std::ostream& out, const std::vector<Diagnostic>& diagnostics) {
  for (const auto& d : diagnostics) out << d.str() << "\n";
}

}  // namespace ftcore::cli

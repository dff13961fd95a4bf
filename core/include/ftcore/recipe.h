// Recipes: TOML files that pick every component by name and set its options.
//
//   load_recipe_table()  parse, follow `base = "other.toml"`, apply --set
//   validate_recipe()    check every section against the core's and the
//                        plugins' ParamSpecs; ALL problems in one ConfigError
//
// Sections: [model] [data] [train] [calibration] [distributed] [plugins] (the core's), and
// [adapter] [quantizer] [optimizer] [scheduler] [sampler] [[logger]] whose
// `name` picks a plugin. Every node keeps its file:line:col, across `base`
// files and --set overrides, for messages.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "ftcore/diagnostics.h"
#include "ftcore/registry.h"
#include "ftcore/sdk/params.h"

namespace ftcore {

struct ComponentConfig {
  std::string section;  // "optimizer", "logger" ...
  const RegistryEntry* entry = nullptr;
  sdk::Options options;
  SourcePos where;
  const std::string& name() const { return entry->name; }
};

struct Recipe {
  std::filesystem::path path;
  sdk::Options model, data, train, calibration, distributed;
  std::optional<ComponentConfig> adapter, quantizer, sampler;
  ComponentConfig optimizer, scheduler;
  std::vector<ComponentConfig> loggers;

  // Every component with its resolved options (defaults included).
  std::vector<const ComponentConfig*> components() const;
  // The recipe with every key resolved, plugin versions and library files,
  // as TOML (written as recipe.lock.toml in a run folder).
  std::string lock_toml() const;
};

// Throws ConfigError (syntax errors, missing or cyclic `base`, bad --set).
toml::table load_recipe_table(const std::filesystem::path& path, const std::vector<std::string>& overrides);

// [plugins] paths, resolved against the folder of the file that named them.
std::vector<std::filesystem::path> recipe_plugin_paths(const toml::table& table);

// Throws ConfigError with every problem found.
Recipe validate_recipe(const toml::table& table, const std::filesystem::path& path, const PluginRegistry& registry);

// The core's own sections, as ParamSpecs (so docs/recipes.md covers them).
const std::vector<std::string>& core_section_names();  // model, data, train, calibration, distributed, plugins
std::shared_ptr<const sdk::ParamSpec> core_section_spec(const std::string& section);

// Checks one table against a spec (keys in `reserved` are skipped); appends
// problems to `diagnostics` and returns the user's values.
std::map<std::string, sdk::ParamValue> validate_table(const toml::table& table, const sdk::ParamSpec& spec,
                                                       const std::string& label,
                                                       const std::vector<std::string>& reserved,
                                                       std::vector<Diagnostic>& diagnostics);

// A component's options from TOML assignments ("key = value", as `--set`
// gives them), checked against its ParamSpec like a recipe table named
// `label` (e.g. "[quantizer]"). Throws ConfigError.
sdk::Options options_from_assignments(const RegistryEntry& entry, const std::vector<std::string>& assignments,
                                      const std::string& label);

SourcePos source_of(const toml::node& node);
SourcePos source_of(const toml::key& key, const toml::node& value);

}  // namespace ftcore

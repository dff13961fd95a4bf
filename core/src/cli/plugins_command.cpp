// `ftcore plugins [--kind K] [--json] [--markdown]` and
// `ftcore plugins describe NAME`: what is on the plugin path; and
// find_component (find_component.h), the lookup by typed name.
#include <iostream>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "ftcore/diagnostics.h"
#include "find_component.h"
#include "ftcore/plugin_loader.h"
#include "param_table.h"

namespace po = boost::program_options;

namespace ftcore::cli {

const RegistryEntry* find_component(const PluginRegistry& registry, const std::string& name, std::string* error) {
  std::vector<const RegistryEntry*> matches;
  for (const RegistryEntry* e : registry.entries())
    if (e->key() == name || e->name == name) matches.push_back(e);
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    std::vector<std::string> keys;
    for (const RegistryEntry* e : registry.entries()) keys.push_back(e->key());
    std::string hint = closest_match(name, keys);
    *error = "no plugin component named '" + name + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?");
  } else {
    std::vector<std::string> keys;
    for (const RegistryEntry* e : matches) keys.push_back(e->key());
    *error = "'" + name + "' is ambiguous: " + join(keys) + "; name it as kind/name";
  }
  return nullptr;
}

int plugins_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore plugins [options]\n       ftcore plugins describe NAME\n\nLists the components on the "
      "plugin path, or describes one (every parameter with type, default, range, doc).\n\nOptions");
  std::string kind_text;
  std::vector<std::string> positional_args, plugin_paths;
  bool json = false, markdown = false;
  visible.add_options()("kind", po::value(&kind_text),
                                                    "only this kind: optimizer, scheduler, adapter, quantizer, "
                                                    "sampler, logger")(
      "json", po::bool_switch(&json), "machine-readable output")(
      "markdown", po::bool_switch(&markdown), "the recipe reference (docs/recipes.md)")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder, searched first (repeatable)");
  if (!parse_subcommand(args, visible, positional_args)) return kExitOk;

  PluginRegistry registry;
  PluginSearchOptions search;
  for (const auto& p : plugin_paths) search.explicit_paths.emplace_back(p);
  // The generated reference documents the in-tree plugins only.
  if (markdown) search.use_environment = false;
  PluginLoadReport report = load_plugins(search, registry);

  if (!positional_args.empty()) {
    if (positional_args[0] != "describe" || positional_args.size() != 2)
      throw po::error("expected `ftcore plugins describe NAME`");
    std::string error;
    const RegistryEntry* e = find_component(registry, positional_args[1], &error);
    if (!e) {
      std::cerr << "ftcore plugins describe: " << error << "\n";
      return kExitUsage;
    }
    if (json) {
      nlohmann::json j = {{"key", e->key()},         {"summary", e->summary},
                          {"version", e->library_version()}, {"library", e->library_path().string()},
                          {"params", spec_json(*e->params)}};
      std::cout << j.dump(2) << "\n";
    } else {
      std::cout << describe_text(e->key() + "  (" + e->library_version() + ", " + e->library_path().string() + ")",
                                 e->summary, *e->params);
    }
    return kExitOk;
  }
  if (markdown) {
    std::cout << recipes_markdown(registry);
    return kExitOk;
  }

  std::optional<sdk::ComponentKind> only;
  if (!kind_text.empty()) {
    sdk::ComponentKind k;
    if (!sdk::parse_component_kind(kind_text, &k)) throw po::error("unknown --kind '" + kind_text + "'");
    only = k;
  }
  auto entries = only ? registry.entries(*only) : registry.entries();
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const RegistryEntry* e : entries)
      list.push_back({{"key", e->key()},
                      {"kind", sdk::component_kind_name(e->kind)},
                      {"name", e->name},
                      {"summary", e->summary},
                      {"version", e->library_version()},
                      {"library", e->library_path().string()}});
    nlohmann::json refused = nlohmann::json::array();
    for (const auto& r : report.refused) refused.push_back({{"library", r.path.string()}, {"reason", r.reason}});
    std::cout << nlohmann::json{{"components", list}, {"refused", refused}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const RegistryEntry* e : entries) {
    std::string key = e->key();
    key.resize(std::max<size_t>(key.size() + 2, 34), ' ');
    std::cout << key << e->summary << "\n";
  }
  for (const auto& r : report.refused) std::cout << "refused: " << r.reason << "\n";
  return kExitOk;
}

}  // namespace ftcore::cli

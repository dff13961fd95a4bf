// `ftcore validate RECIPE [--set k=v]...`: exit 0 when the recipe is valid,
// 2 with every error on stderr (file:line:col: message) when not.
#include <iostream>

#include <boost/program_options.hpp>

#include "command_line.h"
#include "commands.h"
#include "session.h"

namespace po = boost::program_options;

namespace ftcore::cli {

int validate_command(const std::vector<std::string>& args) {
  po::options_description visible("Usage: ftcore validate RECIPE [options]\n\nChecks a recipe against every "
                                  "component's parameters and reports all errors at once.\n\nOptions");
  std::vector<std::string> positionals, overrides, plugin_paths;
  bool print_lock = false;
  visible.add_options()(
      "set", po::value(&overrides)->composing(), "override a key: --set optimizer.lr=3e-4 (repeatable)")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder, searched first (repeatable)")(
      "print-resolved", po::bool_switch(&print_lock), "print the recipe with every key resolved");
  if (!parse_subcommand(args, visible, positionals, 1)) return kExitOk;
  if (positionals.empty()) throw po::error("validate needs a RECIPE file");
  const std::string& recipe = positionals[0];

  auto loaded = load_and_validate(recipe, overrides, plugin_paths);
  if (print_lock) {
    std::cout << loaded->recipe.lock_toml();
    return kExitOk;
  }
  std::string summary;
  for (const ComponentConfig* c : loaded->recipe.components())
    summary += (summary.empty() ? "" : ", ") + c->section + " " + c->entry->name;
  std::cout << recipe << ": ok (" << summary << ")\n";
  return kExitOk;
}

}  // namespace ftcore::cli

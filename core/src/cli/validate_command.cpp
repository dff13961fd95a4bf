// `ftcore validate RECIPE [--set k=v]...`: exit 0 when the recipe is valid,
// 2 with every error on stderr (file:line:col: message) when not.
#include <iostream>

#include <boost/program_options.hpp>

#include "commands.h"
#include "session.h"

namespace po = boost::program_options;

namespace ftcore::cli {

int validate_command(const std::vector<std::string>& args) {
  po::options_description visible("Usage: ftcore validate RECIPE [options]\n\nChecks a recipe against every "
                                  "component's parameters and reports all errors at once.\n\nOptions");
  std::string recipe;
  std::vector<std::string> overrides, plugin_paths;
  bool print_lock = false;
  visible.add_options()("help,h", "show this help")(
      "set", po::value(&overrides)->composing(), "override a key: --set optimizer.lr=3e-4 (repeatable)")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder, searched first (repeatable)")(
      "print-resolved", po::bool_switch(&print_lock), "print the recipe with every key resolved");
  po::options_description all;
  all.add(visible).add_options()("recipe", po::value(&recipe));
  po::positional_options_description positional;
  positional.add("recipe", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << visible << "\n";
    return kExitOk;
  }
  if (recipe.empty()) throw po::error("validate needs a RECIPE file");

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

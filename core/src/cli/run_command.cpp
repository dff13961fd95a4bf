// `ftcore run RECIPE [--set k=v]... [--output-dir D]`.
//
// This build validates the recipe and constructs every component that does
// not need a model (scheduler, sampler, loggers); the model loader and the
// trainer are not part of it yet, so it then stops with exit code 1 and says
// so, rather than pretending to train.
#include <iostream>

#include <boost/program_options.hpp>

#include "command_line.h"
#include "commands.h"
#include "session.h"

namespace po = boost::program_options;

namespace ftcore::cli {

int run_command(const std::vector<std::string>& args) {
  po::options_description visible("Usage: ftcore run RECIPE [options]\n\nFine-tunes a model as the recipe says.\n\nOptions");
  std::string output_dir;
  std::vector<std::string> positionals, overrides, plugin_paths;
  visible.add_options()(
      "set", po::value(&overrides)->composing(), "override a key: --set optimizer.lr=3e-4 (repeatable)")(
      "output-dir", po::value(&output_dir), "parent folder of the run folder (overrides train.output_dir)")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder, searched first (repeatable)");
  if (!parse_subcommand(args, visible, positionals, 1)) return kExitOk;
  if (positionals.empty()) throw po::error("run needs a RECIPE file");
  const std::string& recipe = positionals[0];
  if (!output_dir.empty()) overrides.push_back("train.output_dir=" + output_dir);

  auto loaded = load_and_validate(recipe, overrides, plugin_paths);
  const Recipe& r = loaded->recipe;
  sdk::SchedulerContext context;
  if (r.optimizer.options.spec()->find("lr")) context.base_lr = r.optimizer.options.get_float("lr");
  auto scheduler = loaded->registry.create_scheduler(*r.scheduler.entry, r.scheduler.options, context);
  for (const auto& l : r.loggers) loaded->registry.create_logger(*l.entry, l.options);
  if (r.sampler) loaded->registry.create_sampler(*r.sampler->entry, r.sampler->options);

  std::cerr << "ftcore run: " << recipe
            << " is valid and its components construct, but this build has no model loader or trainer yet,"
               " so nothing was trained (use `ftcore validate` to check recipes)\n";
  return kExitFailure;
}

}  // namespace ftcore::cli

// `ftcore plugin verify PATH_OR_NAME`: the conformance suite for every
// component a plugin library registers, one PASS/FAIL/SKIP line per check
// (exit 0 when none fails, 1 otherwise); and `ftcore plugin steps`: the
// optimizer step harness (optimizer_steps.h) that reference scripts drive.
#include <unistd.h>

#include <iostream>

#include <boost/program_options.hpp>

#include "command_line.h"
#include "commands.h"
#include "find_component.h"
#include "ftcore/diagnostics.h"
#include "ftcore/plugin_loader.h"
#include "optimizer_steps.h"
#include "plugin_verify.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace ftcore::cli {

namespace {

const char* kPluginUsage =
    "Usage: ftcore plugin verify PATH_OR_NAME   conformance checks of a plugin library (a .so or a component name)\n"
    "       ftcore plugin steps [options]       run an optimizer on tensors from a file (--help for options)\n";

// A .so path loads that library alone; a name (kind/name or bare) finds the
// library on the plugin path that registers it.
fs::path library_of(const std::string& what, const std::vector<std::string>& plugin_paths) {
  const bool names_a_file = what.find(".so") != std::string::npos || what.rfind("./", 0) == 0 || what.rfind('/', 0) == 0;
  if (names_a_file) {
    if (!fs::is_regular_file(what)) throw po::error("no plugin library " + what);
    return fs::absolute(what);
  }
  PluginRegistry registry;
  PluginSearchOptions search;
  for (const auto& p : plugin_paths) search.explicit_paths.emplace_back(p);
  load_plugins(search, registry);
  std::string error;
  const RegistryEntry* entry = find_component(registry, what, &error);
  if (!entry) throw po::error(error);
  return entry->library_path();
}

int verify_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore plugin verify PATH_OR_NAME\n\nRuns the conformance checks for each component the library "
      "registers (optimizer, scheduler, sampler, quantizer, logger, adapter).\n"
      "Exit 0 when no check fails, 1 otherwise.\n\nOptions");
  std::vector<std::string> positionals, plugin_paths;
  visible.add_options()("plugin-path", po::value(&plugin_paths)->composing(),
                        "plugin folder searched first when naming a component (repeatable)");
  if (!parse_subcommand(args, visible, positionals, 1)) return kExitOk;
  if (positionals.size() != 1) throw po::error("expected `ftcore plugin verify PATH_OR_NAME`");

  const fs::path library = library_of(positionals[0], plugin_paths);
  PluginRegistry registry;
  load_plugin_library(library, registry);  // refusals (ABI, libtorch) throw with the reason
  const auto entries = registry.entries();
  std::cout << "verify " << library.string() << ": " << entries.size() << " component(s)\n";
  const fs::path work_dir = fs::temp_directory_path() / ("ftcore-verify-" + std::to_string(::getpid()));
  fs::create_directories(work_dir);
  VerifyReport report(std::cout);
  for (const RegistryEntry* e : entries) {
    verify_spec(*e, report);
    switch (e->kind) {
      case sdk::ComponentKind::Optimizer: verify_optimizer(registry, *e, library, work_dir, report); break;
      case sdk::ComponentKind::Scheduler: verify_scheduler(registry, *e, report); break;
      case sdk::ComponentKind::Sampler: verify_sampler(registry, *e, report); break;
      case sdk::ComponentKind::Logger: verify_logger(registry, *e, work_dir, report); break;
      case sdk::ComponentKind::Quantizer: verify_quantizer(registry, *e, report); break;
      case sdk::ComponentKind::Adapter: verify_adapter(registry, *e, report); break;
    }
  }
  std::error_code ignored;
  fs::remove_all(work_dir, ignored);
  std::cout << "verify: " << report.passed() << " passed, " << report.failed() << " failed, " << report.skipped()
            << " skipped\n";
  return report.failed() == 0 && entries.size() > 0 ? kExitOk : kExitFailure;
}

int steps_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore plugin steps --optimizer NAME --inputs IN.safetensors --steps N --out OUT.safetensors\n"
      "                           [--set KEY=VALUE]... [--first-step K] [--resume STATE] [--save-state STATE]\n\n"
      "Runs N optimizer steps on the parameters and gradients in IN (param.<name>, grad.<step>.<name>, and\n"
      "metadata \"groups\": [{\"name\", \"params\", \"lr_scale\", \"weight_decay\"}]); writes param.<name> to OUT.\n\n"
      "Options");
  OptimizerStepsJob job;
  std::string inputs, out, resume, save_state, library;
  std::vector<std::string> plugin_paths;
  visible.add_options()("help,h", "this help")("optimizer", po::value(&job.optimizer)->required(),
                                                "registered optimizer name")(
      "set", po::value(&job.sets)->composing(), "an option as TOML, e.g. 'lr = 1e-3' (repeatable)")(
      "inputs", po::value(&inputs)->required(), "parameters, gradients and groups (safetensors)")(
      "out", po::value(&out)->required(), "where the final parameters go (safetensors)")(
      "steps", po::value(&job.steps)->required(), "optimizer steps to run")(
      "first-step", po::value(&job.first_step), "index of the first step (its gradients: grad.<K>.*)")(
      "resume", po::value(&resume), "parameters and optimizer state saved by --save-state")(
      "save-state", po::value(&save_state), "save parameters and optimizer state after the last step")(
      "library", po::value(&library), "load only this plugin .so (instead of the plugin path)")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder, searched first (repeatable)");
  po::variables_map vm;
  if (!parse_options(args, visible, vm)) return kExitOk;
  job.inputs = inputs;
  job.out = out;
  job.resume = resume;
  job.save_state = save_state;
  PluginRegistry registry;
  if (!library.empty()) {
    load_plugin_library(library, registry);
  } else {
    PluginSearchOptions search;
    for (const auto& p : plugin_paths) search.explicit_paths.emplace_back(p);
    load_plugins(search, registry);
  }
  run_optimizer_steps(registry, job);
  return kExitOk;
}

}  // namespace

int plugin_command(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << kPluginUsage;
    return kExitUsage;
  }
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << kPluginUsage;
    return kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "verify") return verify_command(rest);
  if (args[0] == "steps") return steps_command(rest);
  throw po::error("unknown `ftcore plugin " + args[0] + "`; expected verify or steps");
}

}  // namespace ftcore::cli

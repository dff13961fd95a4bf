// `ftcore run RECIPE [--set k=v]... [--output-dir D] [--nproc-per-node N] [--overwrite]`:
// trains as the recipe says (core/include/ftcore/trainer.h); under torchrun
// each worker runs this, and --nproc-per-node starts them (torchrun_launch.h). Exit codes: 0 trained, 1 stopped
// (NaN loss, loss watchdog, a runtime failure), 2 a recipe problem, 130/143
// interrupted by SIGINT/SIGTERM after saving a checkpoint.
#include <iomanip>
#include <cstdlib>
#include <iostream>

#include <boost/program_options.hpp>

#include "command_line.h"
#include "commands.h"
#include "ftcore/runtime.h"
#include "ftcore/stop_request.h"
#include "ftcore/trainer.h"
#include "session.h"
#include "torchrun_launch.h"

namespace po = boost::program_options;

namespace ftcore::cli {

namespace {

void print_eval(const std::string& label, const EvalRecord& eval) {
  std::cout << label;
  for (const auto& [k, v] : eval.values) std::cout << "  " << k << " " << std::setprecision(4) << std::fixed << v;
  std::cout << "\n";
}

// "before" only for an evaluation that ran before the first step.
void print_evals(const TrainingOutcome& outcome) {
  if (!outcome.first_eval) return;
  const EvalRecord& first = *outcome.first_eval;
  const EvalRecord& last = *outcome.last_eval;
  if (first.step == 0) {
    print_eval("eval before:", first);
    if (last.step != 0) print_eval("eval after: ", last);
    return;
  }
  print_eval("eval at step " + std::to_string(first.step) + ":", first);
  if (last.step != first.step) print_eval("eval at step " + std::to_string(last.step) + ":", last);
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
  po::options_description visible("Usage: ftcore run RECIPE [options]\n\nFine-tunes a model as the recipe says.\n\nOptions");
  std::string output_dir;
  std::vector<std::string> positionals, overrides, plugin_paths;
  int nproc = 1;
  TrainingRequest request;
  visible.add_options()(
      "set", po::value(&overrides)->composing(), "override a key: --set optimizer.lr=3e-4 (repeatable)")(
      "output-dir", po::value(&output_dir), "parent folder of the run folder (overrides train.output_dir)")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder, searched first (repeatable)")(
      "nproc-per-node", po::value(&nproc), "start N worker processes on this machine through torchrun")(
      "overwrite", po::bool_switch(&request.overwrite),
      "start afresh in a run folder holding a previous run (its checkpoints, final weights and metrics are replaced)");
  if (!parse_subcommand(args, visible, positionals, 1)) return kExitOk;
  if (positionals.empty()) throw po::error("run needs a RECIPE file");
  const std::string& recipe = positionals[0];
  if (!output_dir.empty()) overrides.push_back("train.output_dir=" + output_dir);

  auto loaded = load_and_validate(recipe, overrides, plugin_paths);  // recipe errors: exit 2 before any worker
  if (nproc < 1) throw po::error("--nproc-per-node must be at least 1");
  if (nproc > 1) {
    if (std::getenv("WORLD_SIZE")) throw po::error("--nproc-per-node under torchrun: torchrun already started the workers");
    std::vector<std::string> worker_args;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--nproc-per-node") { ++i; continue; }
      if (args[i].rfind("--nproc-per-node=", 0) == 0) continue;
      worker_args.push_back(args[i]);
    }
    exec_torchrun(nproc, worker_args);
  }
  join_thread_sharing();  // this process trains: it takes its share of the cores (runtime.h)
  TrainingOutcome outcome;
  try {
    outcome = run_training(loaded->recipe, loaded->registry, request);
  } catch (const StopRequested& stop) {  // before training started: nothing to save
    std::cerr << "ftcore run: " << stop.what() << ": stopped before training; nothing to save\n";
    return 128 + stop.signal();
  }
  print_evals(outcome);
  switch (outcome.status) {
    case TrainingOutcome::Status::Completed:
      std::cout << "ftcore run: " << outcome.message << "\n";
      return kExitOk;
    case TrainingOutcome::Status::Interrupted:
      std::cerr << "ftcore run: " << outcome.message << "\n";
      return 128 + outcome.signal;
    case TrainingOutcome::Status::Stopped:
      break;
  }
  std::cerr << "ftcore run: " << outcome.message << "\n";
  return kExitFailure;
}

}  // namespace ftcore::cli

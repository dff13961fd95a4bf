// `ftcore ab`: A/B tests of components (core/src/ab/):
//   ftcore ab A.toml B.toml [C.toml ...] [--seeds N | --seed-list 1,2,3] [--set k=v]... [--out DIR]
//             [--jobs J] [--metric NAME] [--aa] [--stop-hopeless MARGIN]
//   ftcore ab EXPERIMENT.toml [--jobs J] [--out DIR]
//   ftcore ab report DIR
// (--dry-run: validate and print the differences only.)
// Exit codes: 0 done, 1 a run failed, 2 a bad experiment (located).
#include <fstream>
#include <iostream>
#include <set>

#include <boost/program_options.hpp>
#include <toml++/toml.h>

#include "../ab/ab_report.h"
#include "../ab/ab_summary.h"
#include "../ab/experiment.h"
#include "../ab/experiment_runner.h"
#include "command_line.h"
#include "commands.h"
#include "ftcore/atomic_file.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ftcore::cli {

namespace {

bool is_experiment_file(const fs::path& path) {
  try {
    return toml::parse_file(path.string()).contains("experiment");
  } catch (const std::exception&) {
    return false;  // reported as a recipe error later
  }
}

// Prints what differs between arms; warns when more than one component section does.
void print_differences(const ab::Experiment& e, const std::vector<ab::ResolvedSettings>& settings) {
  const auto diff = ab::arm_differences(settings);
  std::cout << "ftcore ab: " << e.arms.size() << " arms x " << e.seeds.size() << " seeds; the arms differ in:\n";
  std::set<std::string> sections;
  static const std::set<std::string> components = {"adapter", "quantizer", "optimizer", "scheduler", "sampler", "logger"};
  for (const auto& [key, values] : diff) {
    std::cout << "  " << key << ":";
    for (size_t i = 0; i < values.size(); ++i) std::cout << "  " << e.arms[i].name << " = " << values[i];
    std::cout << "\n";
    const std::string section = key.substr(0, key.find('.'));
    if (components.count(section)) sections.insert(section);
  }
  if (sections.size() > 1) {
    std::string list;
    for (const auto& s : sections) list += (list.empty() ? "" : ", ") + s;
    std::cerr << "warning: the arms differ in more than one component (" << list
              << "): a difference cannot be put down to one of them\n";
  }
}

int finish(const ab::Experiment& e, const std::vector<ab::ResolvedSettings>& settings, const ab::ExperimentRuns& runs) {
  const nlohmann::json summary = ab::build_summary(e, settings, runs);
  write_file_atomically(e.out_dir / "summary.json", summary.dump(2) + "\n");
  ab::write_reports(e.out_dir, summary);
  for (auto& [arm, verdict] : summary["verdicts"].items())
    std::cout << "ftcore ab: " << arm << " vs " << e.arms.front().name << " on " << e.metric << ": "
              << verdict.get<std::string>() << "\n";
  std::cout << "ftcore ab: report in " << (e.out_dir / "report.html").string() << "\n";
  return kExitOk;
}

int report_command(const std::vector<std::string>& positionals) {
  if (positionals.size() != 2) throw po::error("ab report needs one experiment folder: ftcore ab report DIR");
  std::vector<ab::ResolvedSettings> settings;
  const ab::Experiment e = ab::load_experiment(positionals[1], settings);
  return finish(e, settings, ab::read_experiment_runs(e));
}

}  // namespace

int ab_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore ab A.toml B.toml [C.toml ...] [options]\n"
      "       ftcore ab EXPERIMENT.toml [options]\n"
      "       ftcore ab report DIR\n\n"
      "A/B tests recipes: every arm (the first is the control) runs once per seed with paired\n"
      "random numbers; each metric is compared arm by arm against the control.\n\nOptions");
  std::vector<std::string> positionals, overrides, plugin_paths;
  std::string seed_list, out, metric;
  int seeds = 0, jobs = 0;
  double stop_hopeless = 0.0;
  bool aa = false, dry_run = false;
  visible.add_options()("seeds", po::value(&seeds), "seeds 1..N (default 5)")(
      "seed-list", po::value(&seed_list), "explicit seeds: 1,2,3")(
      "set", po::value(&overrides)->composing(), "override a key in every arm (repeatable)")(
      "out", po::value(&out), "experiment folder (default runs/ab/<control>-vs-<arm>)")(
      "jobs", po::value(&jobs), "runs at once; the cores are divided between them (default 1)")(
      "metric", po::value(&metric), "metric of the verdict (default eval_loss)")(
      "aa", po::bool_switch(&aa), "add an A/A arm (the control again) measuring the noise floor")(
      "stop-hopeless", po::value(&stop_hopeless), "after 3 seeds, stop an arm worse than the control by this margin")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder (repeatable)")(
      "dry-run", po::bool_switch(&dry_run), "validate the arms and print how they differ; run nothing");
  if (!parse_subcommand(args, visible, positionals)) return kExitOk;
  if (positionals.empty()) throw po::error("ab needs recipes (two or more) or an experiment file");
  if (positionals[0] == "report") return report_command(positionals);

  ab::Experiment e;
  if (positionals.size() == 1 && is_experiment_file(positionals[0])) {
    e = ab::read_experiment_file(positionals[0]);
    for (ab::Arm& arm : e.arms) arm.overrides.insert(arm.overrides.begin(), overrides.begin(), overrides.end());
  } else {
    e.arms = ab::arms_from_recipes(std::vector<fs::path>(positionals.begin(), positionals.end()), overrides);
    for (int64_t k = 1; k <= 5; ++k) e.seeds.push_back(k);
    e.out_dir = fs::path("runs") / "ab" / (e.arms.front().name + "-vs-" + (e.arms.size() > 1 ? e.arms[1].name : "none"));
  }
  if (seeds > 0) {
    e.seeds.clear();
    for (int64_t k = 1; k <= seeds; ++k) e.seeds.push_back(k);
  } else if (args.end() != std::find(args.begin(), args.end(), "--seeds")) {
    throw po::error("--seeds must be at least 2");
  }
  if (!seed_list.empty()) e.seeds = ab::parse_seed_list(seed_list);
  if (!out.empty()) e.out_dir = out;
  if (jobs > 0) e.jobs = jobs;
  if (!metric.empty()) e.metric = metric;
  if (stop_hopeless > 0.0) e.stop_hopeless = stop_hopeless;
  if (aa && std::none_of(e.arms.begin(), e.arms.end(), [](const ab::Arm& a) { return a.aa_copy; })) ab::add_aa_arm(e);
  e.metric = ab::canonical_metric(e.metric, e.source.empty() ? "--metric" : e.source.string());
  ab::check_experiment(e);

  const std::vector<ab::ResolvedSettings> settings = ab::resolve_arms(e, plugin_paths);
  print_differences(e, settings);
  if (dry_run) return kExitOk;
  ab::save_experiment(e, settings);
  const ab::ExperimentRuns runs = ab::run_experiment(e, settings);
  return finish(e, settings, runs);
}

}  // namespace ftcore::cli

// The experiment's runs as child processes (experiment_runner.h).
#include "experiment_runner.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ftcore/atomic_file.h"
#include "ftcore/hash.h"
#include "ab_summary.h"
#include "paired_statistics.h"

namespace fs = std::filesystem;

namespace ftcore::ab {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string run_key(const ResolvedSettings& settings, int64_t seed) {
  std::string text;
  for (const auto& [k, v] : settings) text += k + "=" + v + "\n";
  return sha256_hex(text + "train.seed=" + std::to_string(seed));
}

struct Child {
  size_t run = 0;
  pid_t pid = -1;
  double started = 0.0;
};

// fork + exec `ftcore run ARM_RECIPE --set ...`, output appended to the run's ab_run.log.
pid_t start_run(const Arm& arm, const RunRecord& r, int threads) {
  std::vector<std::string> args = {fs::read_symlink("/proc/self/exe").string(), "run", arm.recipe.string()};
  std::vector<std::string> sets = arm.overrides;
  sets.push_back("train.seed=" + std::to_string(r.seed));
  sets.push_back("train.output_dir=\"" + r.dir.parent_path().string() + "\"");
  sets.push_back("train.run_name=\"" + r.dir.filename().string() + "\"");
  sets.push_back("train.resume_from_checkpoint=\"auto\"");
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  const std::string log = (r.dir / "ab_run.log").string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("ftcore ab: fork failed: ") + std::strerror(errno));
  if (pid > 0) return pid;
  // Child: die with the runner; output to the run's log; cores divided.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(137);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
  ::setenv("FTCORE_NUM_THREADS", std::to_string(threads).c_str(), 1);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

std::string tail_of(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

std::optional<nlohmann::json> read_result(const fs::path& dir) {
  std::ifstream in(dir / "ab_result.json");
  if (!in) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Every (arm, seed) in run order (arms interleaved within a seed), with the
// metrics of those already finished.
ExperimentRuns planned_runs(const Experiment& e) {
  ExperimentRuns out;
  for (int64_t seed : e.seeds)
    for (const Arm& arm : e.arms) {
      RunRecord r;
      r.arm = arm.name;
      r.seed = seed;
      r.dir = run_folder(e, arm.name, seed);
      if (auto result = read_result(r.dir)) {
        r.metrics = read_run_metrics(r.dir, (*result)["wall_seconds"].get<double>(), (*result)["diverged"].get<bool>());
        r.finished = true;
      }
      out.runs.push_back(std::move(r));
    }
  return out;
}

class Scheduler {
 public:
  Scheduler(const Experiment& e, const std::vector<ResolvedSettings>& settings)
      : e_(e), settings_(settings), runs_(planned_runs(e)) {}

  ExperimentRuns run() {
    adopt_finished();
    const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    const int jobs = std::max(1, std::min(e_.jobs, cores));
    threads_ = std::max(1, cores / jobs);
    size_t next = 0;
    std::vector<Child> running;
    while (true) {
      while (static_cast<int>(running.size()) < jobs && (next = next_pending(next)) < runs_.runs.size()) {
        running.push_back(launch(next));
        ++next;
      }
      if (running.empty()) break;
      progress(running);
      int status = 0;
      const pid_t done = ::waitpid(-1, &status, 0);
      if (done < 0) throw std::runtime_error(std::string("ftcore ab: waitpid: ") + std::strerror(errno));
      auto it = std::find_if(running.begin(), running.end(), [&](const Child& c) { return c.pid == done; });
      if (it == running.end()) continue;
      const Child child = *it;
      running.erase(it);
      finish(child, status, running);
    }
    std::cerr << "\r\x1b[Kab: " << done_count() << "/" << runs_.runs.size() << " runs done\n";
    return runs_;
  }

 private:
  size_t arm_index(const std::string& name) const {
    for (size_t i = 0; i < e_.arms.size(); ++i)
      if (e_.arms[i].name == name) return i;
    return 0;
  }

  void adopt_finished() {
    for (RunRecord& r : runs_.runs) {
      const std::string key = run_key(settings_[arm_index(r.arm)], r.seed);
      std::ifstream existing(r.dir / "ab_key");
      std::string found;
      if (existing && std::getline(existing, found) && found != key)
        throw ConfigError({{{(r.dir / "ab_key").string(), 0, 0},
                            "this run folder belongs to an experiment with other settings (arm \"" + r.arm +
                                "\" changed since): use another --out, or remove the folder"}});
    }
    update_hopeless();
  }

  size_t next_pending(size_t from) const {
    for (size_t i = from; i < runs_.runs.size(); ++i) {
      const RunRecord& r = runs_.runs[i];
      if (!r.finished && !launched_.count(i) && !runs_.stopped_hopeless.count(r.arm)) return i;
    }
    return runs_.runs.size();
  }

  Child launch(size_t i) {
    RunRecord& r = runs_.runs[i];
    fs::create_directories(r.dir);
    write_file_atomically(r.dir / "ab_key", run_key(settings_[arm_index(r.arm)], r.seed) + "\n");
    launched_.insert(i);
    current_ = r.arm + " seed " + std::to_string(r.seed);
    return {i, start_run(e_.arms[arm_index(r.arm)], r, threads_), now_seconds()};
  }

  void finish(const Child& child, int status, const std::vector<Child>& running) {
    RunRecord& r = runs_.runs[child.run];
    const double wall = now_seconds() - child.started;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    const std::string last = tail_of(r.dir / "ab_run.log");
    const bool diverged = code == 1 && (last.find("loss of step") != std::string::npos || last.find("watchdog") != std::string::npos);
    if (code != 0 && !diverged) {
      for (const Child& c : running) ::kill(c.pid, SIGTERM);
      const std::string what = "ftcore ab: run " + r.arm + " seed " + std::to_string(r.seed) + " exited " +
                               std::to_string(code) + " (" + last + "); its log: " + (r.dir / "ab_run.log").string();
      if (code == 2) throw ConfigError({{{(r.dir / "ab_run.log").string(), 0, 0}, what}});
      throw std::runtime_error(what);
    }
    wall_total_ += wall;
    ++timed_;
    write_file_atomically(r.dir / "ab_result.json",
                          nlohmann::json{{"exit_code", code}, {"wall_seconds", wall}, {"diverged", diverged}}.dump(2) + "\n");
    r.metrics = read_run_metrics(r.dir, wall, diverged);
    r.finished = true;
    update_hopeless();
  }

  void update_hopeless() {
    if (!e_.stop_hopeless) return;
    const std::string metric = e_.metric;
    const bool higher = higher_is_better(metric);
    for (size_t a = 1; a < e_.arms.size(); ++a) {
      const std::string& arm = e_.arms[a].name;
      if (runs_.stopped_hopeless.count(arm)) continue;
      const auto [control, treatment] = paired_values(e_, runs_, arm, metric);
      if (control.size() < 3) continue;
      if (hopeless(compare_paired(control, treatment, higher, kBootstrapSeed), higher, *e_.stop_hopeless)) {
        runs_.stopped_hopeless[arm] = static_cast<int64_t>(control.size());
        std::cerr << "\r\x1b[Kab: arm " << arm << " is worse than the control by more than " << *e_.stop_hopeless
                  << " in " << metric << " after " << control.size() << " seeds: no more seeds for it\n";
      }
    }
  }

  size_t done_count() const {
    return static_cast<size_t>(std::count_if(runs_.runs.begin(), runs_.runs.end(), [](const RunRecord& r) { return r.finished; }));
  }

  void progress(const std::vector<Child>& running) const {
    size_t left = 0;
    for (const RunRecord& r : runs_.runs)
      if (!r.finished && !runs_.stopped_hopeless.count(r.arm)) ++left;
    std::ostringstream line;
    line << "ab: " << done_count() << "/" << runs_.runs.size() << " runs done; running " << current_;
    if (running.size() > 1) line << " (+" << running.size() - 1 << ")";
    if (timed_ > 0) {
      const double eta = wall_total_ / static_cast<double>(timed_) * static_cast<double>(left) /
                         static_cast<double>(std::max<size_t>(running.size(), 1));
      line << "; ETA " << static_cast<int>(eta / 60) << "m" << static_cast<int>(eta) % 60 << "s";
    }
    std::cerr << "\r\x1b[K" << line.str() << std::flush;
  }

  const Experiment& e_;
  const std::vector<ResolvedSettings>& settings_;
  ExperimentRuns runs_;
  std::set<size_t> launched_;
  std::string current_;
  int threads_ = 1;
  double wall_total_ = 0.0;
  size_t timed_ = 0;
};

}  // namespace

fs::path run_folder(const Experiment& e, const std::string& arm, int64_t seed) {
  return e.out_dir / "runs" / arm / ("seed-" + std::to_string(seed));
}

ExperimentRuns run_experiment(const Experiment& e, const std::vector<ResolvedSettings>& settings) {
  return Scheduler(e, settings).run();
}

std::pair<std::vector<double>, std::vector<double>> paired_values(const Experiment& e, const ExperimentRuns& runs,
                                                                  const std::string& arm, const std::string& metric) {
  std::pair<std::vector<double>, std::vector<double>> out;
  for (int64_t seed : e.seeds) {
    const RunRecord *control = nullptr, *treatment = nullptr;
    for (const RunRecord& r : runs.runs) {
      if (r.seed != seed || !r.finished || !r.metrics.count(metric)) continue;
      if (r.arm == e.arms.front().name) control = &r;
      if (r.arm == arm) treatment = &r;
    }
    if (control && treatment) {
      out.first.push_back(control->metrics.at(metric));
      out.second.push_back(treatment->metrics.at(metric));
    }
  }
  return out;
}

ExperimentRuns read_experiment_runs(const Experiment& e) { return planned_runs(e); }

}  // namespace ftcore::ab

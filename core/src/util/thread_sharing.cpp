// The thread-count rule (runtime.h) and this process's slot in the registry
// (thread_registry.h). The share is set with at::set_num_threads at step
// boundaries, from the thread that runs the step: OpenMP's thread count is a
// per-thread setting of the thread that opens the parallel regions.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include "../dist/launch_environment.h"
#include "ftcore/diagnostics.h"
#include "ftcore/runtime.h"
#include "thread_registry.h"

namespace ftcore {

namespace {

int cores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

// torchrun's local workers split the cores already; sharing never gives more.
int cores_per_local_worker() { return std::max(1, cores() / dist::local_worker_count()); }

[[noreturn]] void bad_variable(const std::string& name, const std::string& value, const std::string& want) {
  throw ConfigError({{{"environment " + name, 0, 0}, "'" + value + "' is not " + want}});
}

// A positive count, from "N" (FTCORE_NUM_THREADS) or "N[,M...]" (OMP_NUM_THREADS:
// the outermost level's count is the one libtorch's regions use).
int parse_count(const std::string& name, const std::string& value, bool list) {
  const std::string head = list ? value.substr(0, value.find(',')) : value;
  char* end = nullptr;
  const long n = std::strtol(head.c_str(), &end, 10);
  if (head.empty() || *end != '\0' || n < 1 || n > 4096) bad_variable(name, value, "a positive thread count");
  return static_cast<int>(n);
}

struct Sharing {
  std::unique_ptr<ThreadRegistry> registry;  // null: not joined
  bool sharing = false;
  int threads = 0;
};
Sharing& sharing_state() {
  static Sharing state;
  return state;
}
std::mutex& sharing_mutex() {
  static std::mutex m;
  return m;
}

int apply_share(Sharing& s) {
  const SlotCensus census = s.registry->census();
  const int share = share_of_cores(cores(), census, cores_per_local_worker());
  if (share != s.threads) {
    spdlog::info("threads: {} -> {}: this machine's {} cores, {} sharing ftcore processes, {} threads fixed by others",
                 s.threads, share, cores(), census.sharing, census.fixed_threads);
    at::set_num_threads(share);
    s.threads = share;
  }
  return share;
}

}  // namespace

ThreadPolicy thread_policy() {
  ThreadPolicy p;
  if (const char* v = std::getenv("FTCORE_NUM_THREADS"); v && *v) {
    p.mode = ThreadPolicy::Mode::Fixed;
    p.threads = parse_count("FTCORE_NUM_THREADS", v, false);
    p.reason = "FTCORE_NUM_THREADS=" + std::to_string(p.threads);
    return p;
  }
  if (const char* v = std::getenv("OMP_NUM_THREADS"); v && *v) {
    p.mode = ThreadPolicy::Mode::Fixed;
    p.threads = parse_count("OMP_NUM_THREADS", v, true);
    p.reason = "OMP_NUM_THREADS=" + std::to_string(p.threads);
    return p;
  }
  p.threads = cores_per_local_worker();
  const char* v = std::getenv("FTCORE_THREAD_SHARING");
  const std::string switch_value = v ? v : "";
  if (switch_value == "0") {
    p.mode = ThreadPolicy::Mode::Unshared;
    p.reason = "FTCORE_THREAD_SHARING=0";
    return p;
  }
  if (!switch_value.empty() && switch_value != "1") bad_variable("FTCORE_THREAD_SHARING", switch_value, "0 or 1");
  p.mode = ThreadPolicy::Mode::Sharing;
  p.reason = "sharing";
  return p;
}

void join_thread_sharing() {
  std::lock_guard<std::mutex> lock(sharing_mutex());
  Sharing& s = sharing_state();
  if (s.registry) return;
  const ThreadPolicy policy = thread_policy();
  if (policy.mode == ThreadPolicy::Mode::Unshared) return;  // the old default: invisible to others too
  ThreadSlot slot;
  slot.fixed = policy.mode == ThreadPolicy::Mode::Fixed;
  slot.threads = slot.fixed ? policy.threads : 0;
  try {
    s.registry = std::make_unique<ThreadRegistry>(default_registry_dir(), slot);
  } catch (const std::exception& e) {
    // Training does not depend on the registry; say so and keep today's count.
    spdlog::warn("{}; this process keeps {} threads and does not share the cores with other ftcore processes",
                 e.what(), policy.threads);
    return;
  }
  s.sharing = !slot.fixed;
  s.threads = at::get_num_threads();
  if (s.sharing) apply_share(s);
}

int rebalance_threads() {
  std::lock_guard<std::mutex> lock(sharing_mutex());
  Sharing& s = sharing_state();
  if (!s.registry || !s.sharing) return at::get_num_threads();
  return apply_share(s);
}

}  // namespace ftcore

// The machine-wide registry of ftcore processes (core/src/util/thread_registry.h)
// and the thread-count rule (runtime.h): slots taken and released, holders in
// other processes counted while alive and reclaimed once dead, the share, and
// the environment variables that fix the count.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "../../core/src/util/thread_registry.h"
#include "ftcore/diagnostics.h"
#include "ftcore/runtime.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ftcore::SlotCensus;
using ftcore::ThreadPolicy;
using ftcore::ThreadRegistry;
using ftcore::ThreadSlot;
using ftcore::testing::ScopedEnv;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("ftcore_thread_registry_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

ThreadSlot sharing() { return ThreadSlot{}; }
ThreadSlot fixed(int n) { return ThreadSlot{true, n}; }

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

// A holder in another process: takes a slot, reports its path, then waits to
// be killed (its destructor never runs: only the kernel drops the lock).
struct ForeignHolder {
  pid_t pid = -1;
  fs::path slot;
};
ForeignHolder start_foreign_holder(const fs::path& dir, ThreadSlot slot) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  ForeignHolder h;
  h.pid = ::fork();
  if (h.pid == 0) {
    ::close(pipe_fds[0]);
    auto* registry = new ThreadRegistry(dir, slot);  // leaked on purpose: killed, never destroyed
    const std::string path = registry->slot_path().string() + "\n";
    if (::write(pipe_fds[1], path.data(), path.size()) < 0) ::_exit(3);
    for (;;) ::pause();
  }
  ::close(pipe_fds[1]);
  std::string path;
  char c;
  while (::read(pipe_fds[0], &c, 1) == 1 && c != '\n') path += c;
  ::close(pipe_fds[0]);
  h.slot = path;
  return h;
}
void kill_holder(const ForeignHolder& h) {
  ::kill(h.pid, SIGKILL);
  int status = 0;
  ::waitpid(h.pid, &status, 0);
}

}  // namespace

TEST(ThreadShare, SplitsWhatFixedProcessesLeaveBetweenSharers) {
  using ftcore::share_of_cores;
  EXPECT_EQ(share_of_cores(2, SlotCensus{1, 0}, 2), 2);    // alone: every core
  EXPECT_EQ(share_of_cores(2, SlotCensus{2, 0}, 2), 1);    // two runs: one core each
  EXPECT_EQ(share_of_cores(2, SlotCensus{3, 0}, 2), 1);    // more runs than cores: never 0
  EXPECT_EQ(share_of_cores(16, SlotCensus{3, 0}, 16), 5);  // remainder left unused
  EXPECT_EQ(share_of_cores(16, SlotCensus{2, 4}, 16), 6);  // a fixed FTCORE_NUM_THREADS=4 holder
  EXPECT_EQ(share_of_cores(2, SlotCensus{1, 2}, 2), 1);    // fixed holders take every core: still 1
  EXPECT_EQ(share_of_cores(16, SlotCensus{1, 0}, 8), 8);   // torchrun's split caps it (2 local workers)
}

TEST(ThreadRegistry, SlotsAreTakenAndReleased) {
  const fs::path dir = fresh_dir("take");
  ThreadRegistry me(dir, sharing());
  EXPECT_TRUE(fs::exists(me.slot_path()));
  EXPECT_EQ(me.slot_path().extension(), ".slot");
  EXPECT_EQ(me.census().sharing, 1);
  {
    ThreadRegistry other(dir, sharing());
    ThreadRegistry pinned(dir, fixed(3));
    const SlotCensus c = me.census();
    EXPECT_EQ(c.sharing, 2);
    EXPECT_EQ(c.fixed_threads, 3);
    EXPECT_EQ(other.census().sharing, 2);  // each sees the same machine
  }
  const SlotCensus after = me.census();
  EXPECT_EQ(after.sharing, 1);
  EXPECT_EQ(after.fixed_threads, 0);
  EXPECT_EQ(files_in(dir), 1u);  // released slots leave no file behind
  fs::remove_all(dir);
}

TEST(ThreadRegistry, HoldersInOtherProcessesCountUntilTheyDie) {
  const fs::path dir = fresh_dir("dead");
  ThreadRegistry me(dir, sharing());
  const ForeignHolder live = start_foreign_holder(dir, sharing());
  const ForeignHolder pinned = start_foreign_holder(dir, fixed(2));
  SlotCensus c = me.census();
  EXPECT_EQ(c.sharing, 2);
  EXPECT_EQ(c.fixed_threads, 2);
  kill_holder(live);  // SIGKILL: no destructor, the slot file stays, unlocked
  ASSERT_TRUE(fs::exists(live.slot));
  c = me.census();
  EXPECT_EQ(c.sharing, 1);
  EXPECT_EQ(c.fixed_threads, 2);
  EXPECT_FALSE(fs::exists(live.slot));  // reclaimed by the census that found it dead
  kill_holder(pinned);
  c = me.census();
  EXPECT_EQ(c.fixed_threads, 0);
  EXPECT_EQ(files_in(dir), 1u);
  fs::remove_all(dir);
}

TEST(ThreadRegistry, SlotsBeingCreatedAreSkippedAndStaleOnesRemoved) {
  const fs::path dir = fresh_dir("tmp");
  ThreadRegistry me(dir, sharing());
  const fs::path fresh = dir / "123-1.tmp", stale = dir / "123-2.tmp";
  std::ofstream(fresh) << "sharing\n";
  std::ofstream(stale) << "sharing\n";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::minutes(5));
  EXPECT_EQ(me.census().sharing, 1);  // neither counts: a .tmp is not a slot yet
  EXPECT_TRUE(fs::exists(fresh));     // its creator may be about to lock it
  EXPECT_FALSE(fs::exists(stale));    // unlocked for minutes: its creator died
  fs::remove_all(dir);
}

TEST(ThreadRegistry, AnUnreadableSlotCountsAsSharing) {
  const fs::path dir = fresh_dir("garbled");
  ThreadRegistry me(dir, sharing());
  const fs::path odd = dir / "999-9.slot";
  std::ofstream(odd) << "fixed lots\n";
  const int fd = ::open(odd.c_str(), O_RDONLY);  // held by "someone": another open file description
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  EXPECT_EQ(me.census().sharing, 2);
  EXPECT_EQ(me.census().fixed_threads, 0);
  ::close(fd);
  fs::remove_all(dir);
}

TEST(ThreadRegistry, DefaultFolderFollowsTheOverride) {
  ScopedEnv dir("FTCORE_THREAD_REGISTRY", "/tmp/some/registry");
  EXPECT_EQ(ftcore::default_registry_dir(), fs::path("/tmp/some/registry"));
}

TEST(ThreadPolicy, UserSettingsWin) {
  ScopedEnv sharing_switch("FTCORE_THREAD_SHARING", std::nullopt);
  {
    ScopedEnv a("FTCORE_NUM_THREADS", "3"), b("OMP_NUM_THREADS", "1");
    const ThreadPolicy p = ftcore::thread_policy();
    EXPECT_EQ(p.mode, ThreadPolicy::Mode::Fixed);
    EXPECT_EQ(p.threads, 3);  // ftcore's own variable before OpenMP's
    EXPECT_EQ(p.reason, "FTCORE_NUM_THREADS=3");
  }
  {
    ScopedEnv a("FTCORE_NUM_THREADS", std::nullopt), b("OMP_NUM_THREADS", "2,1");
    const ThreadPolicy p = ftcore::thread_policy();
    EXPECT_EQ(p.mode, ThreadPolicy::Mode::Fixed);
    EXPECT_EQ(p.threads, 2);  // the outermost level of a nested list
  }
  {
    ScopedEnv a("FTCORE_NUM_THREADS", std::nullopt), b("OMP_NUM_THREADS", std::nullopt);
    ScopedEnv off("FTCORE_THREAD_SHARING", "0");
    const ThreadPolicy p = ftcore::thread_policy();
    EXPECT_EQ(p.mode, ThreadPolicy::Mode::Unshared);
    EXPECT_EQ(p.threads, static_cast<int>(std::thread::hardware_concurrency()));
  }
  {
    ScopedEnv a("FTCORE_NUM_THREADS", std::nullopt), b("OMP_NUM_THREADS", std::nullopt);
    const ThreadPolicy p = ftcore::thread_policy();
    EXPECT_EQ(p.mode, ThreadPolicy::Mode::Sharing);
    EXPECT_EQ(p.threads, static_cast<int>(std::thread::hardware_concurrency()));  // before any other process counts
  }
}

TEST(ThreadPolicy, MalformedSettingsAreConfigErrorsNamingTheVariable) {
  ScopedEnv b("OMP_NUM_THREADS", std::nullopt);
  auto message = [](const char* name, const char* value) {
    ScopedEnv v(name, value);
    try {
      ftcore::thread_policy();
    } catch (const ftcore::ConfigError& e) {
      return e.diagnostics().at(0).str();
    }
    return std::string("no error");
  };
  {
    ScopedEnv a("FTCORE_NUM_THREADS", std::nullopt);
    EXPECT_EQ(message("FTCORE_THREAD_SHARING", "yes"), "environment FTCORE_THREAD_SHARING: 'yes' is not 0 or 1");
    EXPECT_EQ(message("OMP_NUM_THREADS", "many"), "environment OMP_NUM_THREADS: 'many' is not a positive thread count");
  }
  EXPECT_EQ(message("FTCORE_NUM_THREADS", "0"), "environment FTCORE_NUM_THREADS: '0' is not a positive thread count");
  EXPECT_EQ(message("FTCORE_NUM_THREADS", "2x"), "environment FTCORE_NUM_THREADS: '2x' is not a positive thread count");
}

// The restart with glibc's malloc on transparent huge pages (huge_page_malloc.h).
#include "huge_page_malloc.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include <spdlog/spdlog.h>

#include "environment_switch.h"

namespace ftcore::cli {

namespace {

constexpr const char* kTunables = "GLIBC_TUNABLES";
constexpr const char* kHugePageTunable = "glibc.malloc.hugetlb";
// Set only across the exec: the caller's GLIBC_TUNABLES, "set:VALUE" or "unset".
constexpr const char* kCallersTunables = "FTCORE_CALLERS_GLIBC_TUNABLES";

// Opt-in (huge_page_malloc.h says why it is not the default).
bool huge_pages_wanted() { return environment_switch("FTCORE_HUGE_PAGES", false); }

// Puts the caller's GLIBC_TUNABLES back, as saved in kCallersTunables.
void restore_callers_tunables(const std::string& saved) {
  if (saved.rfind("set:", 0) == 0)
    ::setenv(kTunables, saved.c_str() + 4, 1);
  else
    ::unsetenv(kTunables);
  ::unsetenv(kCallersTunables);
}

}  // namespace

void restart_with_huge_page_malloc(char** argv) {
  if (const char* saved = std::getenv(kCallersTunables)) {  // this is the restarted process
    restore_callers_tunables(saved);
    return;
  }
  if (!huge_pages_wanted()) return;
  const char* callers = std::getenv(kTunables);
  const std::string before = callers ? callers : "";
  if (before.find(std::string(kHugePageTunable) + "=") != std::string::npos) return;  // the caller chose
  // First: glibc parses the value in place, ending its first item with a NUL,
  // so /proc/PID/environ shows that item alone (huge_page_malloc_test reads it).
  const std::string tunables = std::string(kHugePageTunable) + "=1" + (before.empty() ? "" : ":" + before);
  ::setenv(kCallersTunables, callers ? ("set:" + before).c_str() : "unset", 1);
  ::setenv(kTunables, tunables.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  const int error = errno;
  restore_callers_tunables(std::getenv(kCallersTunables));
  spdlog::warn("cannot restart ftcore with {}={} ({}); running without huge pages", kTunables, tunables,
               std::strerror(error));
}

}  // namespace ftcore::cli

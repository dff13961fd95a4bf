// set_training_heap_policy (heap_policy.h).
#include "heap_policy.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace ftcore {

namespace {

constexpr int kMmapThreshold = 1 << 20;  // 1 MiB
constexpr int kTrimThreshold = 64 << 20; // 64 MiB

bool user_tuned_malloc() {
  for (char** e = environ; e && *e; ++e)
    if (std::strncmp(*e, "MALLOC_", 7) == 0 || std::strncmp(*e, "GLIBC_TUNABLES=", 15) == 0) return true;
  return false;
}

}  // namespace

bool set_training_heap_policy() {
  if (user_tuned_malloc()) return false;
  // Setting either turns glibc's dynamic adjustment of both off.
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
}

}  // namespace ftcore

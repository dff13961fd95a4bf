// glibc's thresholds set at load for reuse (heap_reuse.h).
#include "heap_reuse.h"

#include <malloc.h>

#include <cstring>

#include <spdlog/spdlog.h>

#include "environment_switch.h"

namespace ftcore::cli {

namespace {

// glibc's largest mmap threshold on 64-bit (HEAP_MAX_SIZE / 2); mallopt refuses more.
constexpr int kLargestMmapThreshold = 32 << 20;

bool refused_at_load = false;

// NAME's value in envp, or nullptr. At preinit time envp is what the kernel
// passed, so it is read directly rather than through getenv.
const char* value_in(char** envp, const char* name) {
  const size_t length = std::strlen(name);
  for (char** entry = envp; entry && *entry; ++entry)
    if (std::strncmp(*entry, name, length) == 0 && (*entry)[length] == '=') return *entry + length + 1;
  return nullptr;
}

bool caller_chose_thresholds(const char* tunables) {
  return tunables && (std::strstr(tunables, "glibc.malloc.mmap_threshold=") != nullptr ||
                      std::strstr(tunables, "glibc.malloc.trim_threshold=") != nullptr);
}

void set_thresholds_at_load(int, char**, char** envp) {
  const char* reuse = value_in(envp, "FTCORE_HEAP_REUSE");
  if ((reuse && std::strcmp(reuse, "0") == 0) || caller_chose_thresholds(value_in(envp, "GLIBC_TUNABLES"))) return;
  // mallopt returns 1 on success, 0 for a refused value; a trim threshold of
  // -1 turns trimming off (mallopt(3)).
  refused_at_load = mallopt(M_MMAP_THRESHOLD, kLargestMmapThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, -1) != 1;
}

// Runs before every library's initializer (only an executable may have one).
[[gnu::section(".preinit_array"), gnu::used]] void (*set_at_load)(int, char**, char**) = set_thresholds_at_load;

}  // namespace

void check_heap_reuse() {
  environment_switch("FTCORE_HEAP_REUSE", true);  // validates: set at load from the raw environment
  if (refused_at_load) spdlog::warn("glibc refused the heap-reuse thresholds (mallopt); running with its defaults");
}

}  // namespace ftcore::cli

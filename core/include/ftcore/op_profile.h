// FTCORE_PROFILE=FILE: record every ATen op and ftcore's phase ranges
// (ftcore::collate, ftcore::forward_loss, ftcore::backward, ftcore::optimizer,
// ftcore::log ...) over one window — training step FTCORE_PROFILE_STEP
// (default 3: past the first steps' allocations and oneDNN primitive
// creation), or one benchmark forward — with libtorch's Kineto profiler, and
// write it as a Chrome trace. benchmarks/profile_table.py turns a trace into
// the self-time table of docs/benchmarks.md. Off (no cost) without the variable.
// FTCORE_PROFILE_MEMORY=1 adds every CPU allocation and free of the window
// (address, bytes, bytes allocated in all); benchmarks/memory_peak.py names
// what is live at the window's peak and which op allocated it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ftcore {

// The trace file FTCORE_PROFILE names, if set and not empty.
std::optional<std::string> requested_profile_path();

// The 1-based training step FTCORE_PROFILE_STEP names (default 3); a
// ConfigError (exit 2) when it is not a positive integer.
int64_t requested_profile_step();

// Profiles from construction to destruction, then writes the trace to `path`.
class OpProfile {
 public:
  explicit OpProfile(std::string path);
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

 private:
  std::string path_;
};

}  // namespace ftcore

// The FTCORE_PROFILE switch (op_profile.h): Kineto's CPU activity, op input
// shapes (a GEMM's row shows which Linear it is) and, with
// FTCORE_PROFILE_MEMORY, the allocations, saved as a Chrome trace.
#include "ftcore/op_profile.h"

#include "ftcore/diagnostics.h"

#include <cstdlib>

#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/profiler_kineto.h>

namespace ftcore {

std::optional<std::string> requested_profile_path() {
  const char* path = std::getenv("FTCORE_PROFILE");
  if (!path || !*path) return std::nullopt;
  return std::string(path);
}

int64_t requested_profile_step() {
  const char* text = std::getenv("FTCORE_PROFILE_STEP");
  if (!text || !*text) return 3;
  size_t used = 0;
  int64_t step = 0;
  try {
    step = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != std::string(text).size() || step < 1)
    throw ConfigError({{{"environment", 0, 0},
                        "FTCORE_PROFILE_STEP must be a positive step number, got '" + std::string(text) + "'"}});
  return step;
}

OpProfile::OpProfile(std::string path) : path_(std::move(path)) {
  namespace impl = torch::profiler::impl;
  const char* memory = std::getenv("FTCORE_PROFILE_MEMORY");
  const bool profile_memory = memory && *memory && std::string(memory) != "0";
  const impl::ProfilerConfig config(impl::ProfilerState::KINETO, /*report_input_shapes=*/true, profile_memory);
  const std::set<impl::ActivityType> activities{impl::ActivityType::CPU};
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
}

OpProfile::~OpProfile() {
  try {
    torch::autograd::profiler::disableProfiler()->save(path_);
    spdlog::info("FTCORE_PROFILE: trace written to {} (benchmarks/profile_table.py {} prints the table)", path_, path_);
  } catch (const std::exception& e) {
    spdlog::error("FTCORE_PROFILE: could not write {}: {}", path_, e.what());
  }
}

}  // namespace ftcore

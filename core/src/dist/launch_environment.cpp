// Reads torchrun's environment contract (launch_environment.h).
#include "launch_environment.h"

#include <cstdlib>
#include <string>

#include "ftcore/diagnostics.h"

namespace ftcore::dist {

namespace {

ConfigError environment_error(const std::string& message) {
  return ConfigError({{{"environment", 0, 0}, message}});
}

std::optional<std::string> env_text(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  return std::string(v);
}

int env_int(const char* name, int fallback, int minimum) {
  const auto text = env_text(name);
  if (!text) return fallback;
  size_t used = 0;
  long value = 0;
  try {
    value = std::stol(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size() || value < minimum || value > (1L << 30))
    throw environment_error(std::string(name) + " = \"" + *text + "\": expected an integer >= " +
                            std::to_string(minimum) + " (torchrun sets it; check the launch command)");
  return static_cast<int>(value);
}

}  // namespace

std::optional<LaunchEnvironment> read_launch_environment() {
  if (!env_text("WORLD_SIZE")) return std::nullopt;
  LaunchEnvironment e;
  e.world_size = env_int("WORLD_SIZE", 1, 1);
  e.rank = env_int("RANK", 0, 0);
  e.local_rank = env_int("LOCAL_RANK", e.rank, 0);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", e.world_size, 1);
  e.group_rank = env_int("GROUP_RANK", 0, 0);
  e.master_addr = env_text("MASTER_ADDR").value_or("127.0.0.1");
  e.master_port = env_int("MASTER_PORT", 29500, 1);
  e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0, 0);
  e.run_id = env_text("TORCHELASTIC_RUN_ID").value_or("none");
  const std::string agent = env_text("TORCHELASTIC_USE_AGENT_STORE").value_or("False");
  e.agent_hosts_store = agent == "True" || agent == "true" || agent == "1";
  if (e.rank >= e.world_size)
    throw environment_error("RANK = " + std::to_string(e.rank) + " is not below WORLD_SIZE = " +
                            std::to_string(e.world_size));
  if (e.local_rank >= e.local_world_size)
    throw environment_error("LOCAL_RANK = " + std::to_string(e.local_rank) + " is not below LOCAL_WORLD_SIZE = " +
                            std::to_string(e.local_world_size));
  if (e.master_port > 65535)
    throw environment_error("MASTER_PORT = " + std::to_string(e.master_port) + " is not a TCP port");
  return e;
}

int local_worker_count() {
  const auto text = env_text("LOCAL_WORLD_SIZE");
  if (!text || !env_text("WORLD_SIZE")) return 1;
  return env_int("LOCAL_WORLD_SIZE", 1, 1);
}

}  // namespace ftcore::dist

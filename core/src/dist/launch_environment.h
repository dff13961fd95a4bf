// What torchrun (torch's elastic launcher) tells each worker through its
// environment: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_RUN_ID,
// TORCHELASTIC_USE_AGENT_STORE. ftcore has no launcher of its own: this
// contract is the whole interface between torchrun and `ftcore run`.
#pragma once

#include <optional>
#include <string>

namespace ftcore::dist {

struct LaunchEnvironment {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;  // the node's index
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int restart_count = 0;          // > 0: torchrun restarted the group after a failure
  std::string run_id = "none";
  bool agent_hosts_store = false;  // the elastic agent runs the TCPStore: every rank connects as a client
};

// The worker's contract, or nullopt outside torchrun (WORLD_SIZE unset).
// A malformed value is a ConfigError naming the variable and its value.
std::optional<LaunchEnvironment> read_launch_environment();

// Local workers of one machine (LOCAL_WORLD_SIZE, 1 outside torchrun): the
// thread count is split between them so they never oversubscribe the cores.
int local_worker_count();

}  // namespace ftcore::dist

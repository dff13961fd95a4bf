// The c10d process group of a multi-process run, built from the torchrun
// environment: a TCPStore client (or server, when no elastic agent hosts
// one) wrapped in a PrefixStore per restart, and ProcessGroupGloo for CPU
// tensors or ProcessGroupNCCL for CUDA ones. World size 1 builds none of it.
//
// Every collective names what it carries; a failure (a peer that died, or
// one that stalled past timeout_s) becomes a std::runtime_error naming this
// rank, the collective, and the ranks whose heartbeat stopped, so no rank
// hangs and the message says which one was lost.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "ftcore/sdk/params.h"
#include "launch_environment.h"

namespace ftcore::dist {

// The recipe's [distributed] section.
struct DistributedOptions {
  std::string backend = "auto";  // auto (nccl on CUDA, gloo on CPU) | gloo | nccl
  std::chrono::milliseconds timeout{600'000};
  int64_t bucket_bytes = 25 << 20;  // gradient buckets of a full fine-tune
  bool shard_optimizer_state = false;  // ZeRO-1

  static DistributedOptions from_options(const sdk::Options& section);
};

// An all-reduce in flight (ProcessGroup::all_reduce_sum_async).
struct PendingCollective {
  std::shared_ptr<struct WorkHandle> work;
  std::string what;
};

class ProcessGroup {
 public:
  // Connects rank env.rank of env.world_size; `device` picks the backend
  // (CUDA: NCCL on GPU LOCAL_RANK; CPU: Gloo). Throws ConfigError for an
  // impossible backend choice, std::runtime_error when peers never arrive.
  static std::shared_ptr<ProcessGroup> connect(const LaunchEnvironment& env, const DistributedOptions& options,
                                               c10::Device device);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  c10::Device device() const { return device_; }
  const std::string& backend_name() const { return backend_name_; }

  // In-place sum over every rank. `what` names it in errors ("the gradients of step 7").
  void all_reduce_sum(at::Tensor& tensor, const std::string& what);
  PendingCollective all_reduce_sum_async(at::Tensor& tensor, std::string what);
  void wait(PendingCollective& pending);
  // `tensor` (same shape everywhere) takes root's values.
  void broadcast(at::Tensor& tensor, int root, const std::string& what);
  void barrier(const std::string& what);

  // Seconds spent waiting in collectives since the last call (then reset).
  double take_communication_seconds();

 private:
  struct Impl;
  ProcessGroup(int rank, int size, c10::Device device);
  [[noreturn]] void fail(const std::string& what, const std::exception& error, double waited_seconds) const;
  void wait_work(const std::shared_ptr<WorkHandle>& work, const std::string& what);
  // Starts a collective on the backend; a failure to start becomes fail().
  template <typename Issue>
  std::shared_ptr<WorkHandle> issue(const std::string& what, Issue&& call);

  int rank_;
  int size_;
  c10::Device device_;
  std::string backend_name_;
  double communication_seconds_ = 0.0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ftcore::dist

// The process group (process_group.h): store, backend, heartbeats, and
// collectives that fail with a message instead of hanging.
#include "process_group.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "backends.h"
#include "ftcore/diagnostics.h"

namespace ftcore::dist {

struct WorkHandle {
  c10::intrusive_ptr<c10d::Work> work;
};

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string heartbeat_key(int rank) { return "heartbeat/" + std::to_string(rank); }

}  // namespace

DistributedOptions DistributedOptions::from_options(const sdk::Options& section) {
  DistributedOptions o;
  o.backend = section.get_string("backend");
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(section.get_float("timeout_s") * 1000.0));
  o.bucket_bytes = static_cast<int64_t>(section.get_float("bucket_mb") * 1024.0 * 1024.0);
  o.shard_optimizer_state = section.get_bool("shard_optimizer_state");
  return o;
}

// Each rank bumps a counter in the store every second from a thread with its
// own store connection. When a collective fails, the ranks whose counter
// stopped moving are the ones that died or stalled.
class Heartbeat {
 public:
  Heartbeat(c10::intrusive_ptr<c10d::Store> store, int rank) : store_(std::move(store)), rank_(rank) {
    thread_ = std::thread([this] { beat(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  // Ranks (other than this one) whose heartbeat did not advance over `window`.
  std::vector<int> silent_ranks(int size, std::chrono::milliseconds window) {
    std::lock_guard<std::mutex> lock(store_mutex_);
    std::vector<int64_t> before(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) before[static_cast<size_t>(r)] = store_->add(heartbeat_key(r), 0);
    std::this_thread::sleep_for(window);
    std::vector<int> silent;
    for (int r = 0; r < size; ++r)
      if (r != rank_ && store_->add(heartbeat_key(r), 0) == before[static_cast<size_t>(r)]) silent.push_back(r);
    return silent;
  }

 private:
  void beat() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      try {
        std::lock_guard<std::mutex> store_lock(store_mutex_);
        store_->add(heartbeat_key(rank_), 1);
      } catch (const std::exception&) {
        // The store is gone (the agent stopped): collectives will say so.
      }
      wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_;
  std::mutex mutex_, store_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::unique_ptr<Heartbeat> heartbeat;
  std::chrono::milliseconds timeout{0};
};

ProcessGroup::ProcessGroup(int rank, int size, c10::Device device)
    : rank_(rank), size_(size), device_(device), impl_(std::make_unique<Impl>()) {}

ProcessGroup::~ProcessGroup() = default;

std::shared_ptr<ProcessGroup> ProcessGroup::connect(const LaunchEnvironment& env, const DistributedOptions& options,
                                                    c10::Device device) {
  std::string backend = options.backend;
  if (backend == "auto") backend = device.is_cuda() ? "nccl" : "gloo";
  if (backend == "gloo" && device.is_cuda())
    throw ConfigError({{{"[distributed]", 0, 0},
                        "backend = \"gloo\" carries CPU tensors, but the model is on " + device.str() +
                            " (use \"nccl\" or \"auto\")"}});
  if (backend == "nccl" && !device.is_cuda())
    throw ConfigError({{{"[distributed]", 0, 0},
                        "backend = \"nccl\" needs a CUDA device; this run trains on the CPU (use \"gloo\" or \"auto\")"}});

  std::shared_ptr<ProcessGroup> group(new ProcessGroup(env.rank, env.world_size, device));
  group->backend_name_ = backend;
  Impl& impl = *group->impl_;
  impl.timeout = options.timeout;

  // With an elastic agent (static and c10d rendezvous) the agent serves the
  // store and every rank is a client; without one, rank 0 serves it.
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env.master_port);
  store_options.isServer = !env.agent_hosts_store && env.rank == 0;
  store_options.numWorkers = static_cast<size_t>(env.world_size);
  store_options.waitWorkers = false;
  store_options.timeout = options.timeout;
  const auto started = std::chrono::steady_clock::now();
  c10::intrusive_ptr<c10d::Store> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": cannot reach the rendezvous store at " +
                             env.master_addr + ":" + std::to_string(env.master_port) + ": " + e.what());
  }
  // One key space per restart, so a restarted group never reads the keys of
  // the attempt before it.
  impl.store = c10::make_intrusive<c10d::PrefixStore>(
      "ftcore/" + env.run_id + "/attempt-" + std::to_string(env.restart_count), tcp);
  try {
    impl.backend = backend == "nccl"
                       ? make_nccl_backend(impl.store, env.rank, env.world_size, options.timeout, device.index())
                       : make_gloo_backend(impl.store, env.rank, env.world_size, options.timeout);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": building the " + backend + " group of " +
                             std::to_string(env.world_size) + " ranks failed after " +
                             std::to_string(static_cast<int>(seconds_since(started))) + " s: " + e.what());
  }
  impl.heartbeat = std::make_unique<Heartbeat>(impl.store->clone(), env.rank);
  spdlog::info("process group: rank {} of {} ({}, store {}:{}, attempt {})", env.rank, env.world_size, backend,
               env.master_addr, env.master_port, env.restart_count);
  return group;
}

void ProcessGroup::fail(const std::string& what, const std::exception& error, double waited_seconds) const {
  std::ostringstream message;
  message << "rank " << rank_ << ": " << what << " failed after " << static_cast<int>(waited_seconds) << " s";
  try {
    const std::vector<int> silent = impl_->heartbeat->silent_ranks(size_, std::chrono::milliseconds(3000));
    if (!silent.empty()) {
      message << "; lost rank" << (silent.size() > 1 ? "s" : "");
      for (size_t i = 0; i < silent.size(); ++i) message << (i ? ", " : " ") << silent[i];
      message << " (its heartbeat stopped: it died or stalled)";
    }
  } catch (const std::exception&) {
    message << "; the rendezvous store is unreachable too (the launcher stopped?)";
  }
  message << ": " << error.what();
  throw std::runtime_error(message.str());
}

void ProcessGroup::wait_work(const std::shared_ptr<WorkHandle>& handle, const std::string& what) {
  const auto started = std::chrono::steady_clock::now();
  try {
    handle->work->wait(impl_->timeout);
  } catch (const std::exception& e) {
    fail(what, e, seconds_since(started));
  }
  communication_seconds_ += seconds_since(started);
}

template <typename Issue>
std::shared_ptr<WorkHandle> ProcessGroup::issue(const std::string& what, Issue&& call) {
  auto handle = std::make_shared<WorkHandle>();
  try {
    handle->work = call(*impl_->backend);
  } catch (const std::exception& e) {
    fail(what, e, 0.0);
  }
  return handle;
}

PendingCollective ProcessGroup::all_reduce_sum_async(at::Tensor& tensor, std::string what) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  options.timeout = impl_->timeout;
  auto handle = issue(what, [&](c10d::Backend& b) { return b.allreduce(tensors, options); });
  return {std::move(handle), std::move(what)};
}

void ProcessGroup::wait(PendingCollective& pending) {
  if (!pending.work) return;
  wait_work(pending.work, pending.what);
  pending.work.reset();
}

void ProcessGroup::all_reduce_sum(at::Tensor& tensor, const std::string& what) {
  PendingCollective pending = all_reduce_sum_async(tensor, what);
  wait(pending);
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root, const std::string& what) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  options.timeout = impl_->timeout;
  wait_work(issue(what, [&](c10d::Backend& b) { return b.broadcast(tensors, options); }), what);
}

void ProcessGroup::barrier(const std::string& what) {
  c10d::BarrierOptions options;
  options.timeout = impl_->timeout;
  wait_work(issue(what, [&](c10d::Backend& b) { return b.barrier(options); }), what);
}

double ProcessGroup::take_communication_seconds() {
  const double s = communication_seconds_;
  communication_seconds_ = 0.0;
  return s;
}

}  // namespace ftcore::dist

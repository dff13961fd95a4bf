// The run folder's lock and the traces of a previous run (run_folder_lock.h).
#include "run_folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "ftcore/diagnostics.h"

namespace fs = std::filesystem;

namespace ftcore::train {

namespace {

constexpr const char* kLockFile = ".ftcore.lock";
// What a finished or started run writes in its folder, besides checkpoints.
constexpr const char* kRunOutputs[] = {"adapter_model.safetensors", "model.safetensors", "metrics.jsonl"};
constexpr const char* kFinalWeights[] = {"adapter_model.safetensors", "adapter_config.json", "model.safetensors",
                                         "model.safetensors.index.json"};

std::string read_holder_pid(int fd) {
  char buffer[32] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  std::string pid = n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

bool is_checkpoint_entry(const fs::path& p) { return p.filename().string().rfind("checkpoint-", 0) == 0; }

}  // namespace

RunFolderLock::RunFolderLock(const fs::path& run_dir, const fs::path& recipe_path) {
  fs::create_directories(run_dir);
  const fs::path path = run_dir / kLockFile;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_holder_pid(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error != EWOULDBLOCK) throw std::runtime_error("cannot lock " + path.string() + ": " + std::strerror(error));
    throw ConfigError({{{recipe_path.string(), 0, 0},
                        "the run folder " + run_dir.string() + " is in use by another ftcore run (pid " + holder +
                            "); wait for it to end or pick another train.run_name"}});
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
    spdlog::warn("cannot write the pid into {}: {}", path.string(), std::strerror(errno));
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock; the file stays (removing it would race a new holder)
}

std::string previous_run_output(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return "";
  for (const auto& entry : fs::directory_iterator(run_dir, ec))
    if (is_checkpoint_entry(entry.path()) && entry.is_directory()) return entry.path().filename().string();
  for (const char* name : kRunOutputs)
    if (fs::exists(run_dir / name, ec) && fs::file_size(run_dir / name, ec) > 0) return name;
  return "";
}

void remove_previous_run(const fs::path& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return;
  std::vector<fs::path> removed;
  for (const auto& entry : fs::directory_iterator(run_dir))
    if (is_checkpoint_entry(entry.path())) removed.push_back(entry.path());
  for (const char* name : kFinalWeights)
    if (fs::exists(run_dir / name)) removed.push_back(run_dir / name);
  for (const fs::path& p : removed) fs::remove_all(p);
  if (!removed.empty())
    spdlog::info("--overwrite: removed {} checkpoints and final weight files of the previous run in {}",
                 removed.size(), run_dir.string());
}

}  // namespace ftcore::train

// One `ftcore run` per run folder, and no silent second run into a folder
// that holds one.
//
// The lock is an exclusive flock on <run folder>/.ftcore.lock, with the
// holder's pid written inside for the message a second run prints. The
// flock, not the file, is the lock: the kernel drops it when the holder dies,
// so a rerun after a SIGKILL (what `ftcore ab` does) goes on. Only the
// process that writes the run folder takes it (rank 0 of a multi-process run).
#pragma once

#include <filesystem>

namespace ftcore::train {

class RunFolderLock {
 public:
  // Creates the folder. Throws ConfigError (exit 2) naming the holder's pid
  // when another process holds the lock.
  RunFolderLock(const std::filesystem::path& run_dir, const std::filesystem::path& recipe_path);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

// What a previous run left in `run_dir` that a fresh run would replace or
// mix with: "checkpoint-12", "adapter_model.safetensors", "metrics.jsonl"
// ...; empty when nothing.
std::string previous_run_output(const std::filesystem::path& run_dir);

// --overwrite: removes the previous run's checkpoints and final weights (the
// files ftcore writes, nothing else), so that resume_from_checkpoint = "auto"
// later never picks up the old run's. Loggers start their files afresh.
void remove_previous_run(const std::filesystem::path& run_dir);

}  // namespace ftcore::train

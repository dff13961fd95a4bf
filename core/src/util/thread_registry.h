// A machine-wide registry of live ftcore processes, so that two runs on one
// machine split its cores instead of fighting over them.
//
// Why: libtorch's OpenMP (GNU libgomp) threads spin between parallel regions.
// Two processes with one thread per core each spin on cores the other needs
// and both run ~6x slower; a process with one thread per core of ITS SHARE
// never waits on a descheduled teammate. Passive waiting (OMP_WAIT_POLICY)
// would fix the pair but costs a run alone ~35%, and is read at library load.
//
// The registry is a folder of slot files, one per process, each held with an
// exclusive flock for the holder's lifetime: the kernel drops the lock when the
// holder dies however it dies, so a slot whose lock can be taken is a dead
// holder's, and whoever finds it removes it. A slot's text says how the holder
// uses the cores: "sharing" (its thread count follows its share) or "fixed N"
// (N threads the user chose: FTCORE_NUM_THREADS, OMP_NUM_THREADS, ab --jobs).
#pragma once

#include <filesystem>
#include <string>

namespace ftcore {

// How one holder uses the cores.
struct ThreadSlot {
  bool fixed = false;  // false: "sharing"
  int threads = 0;     // the fixed count (fixed only)
};

// The live slots, own included.
struct SlotCensus {
  int sharing = 0;        // processes whose thread count follows their share
  int fixed_threads = 0;  // threads the fixed processes use, summed
};

// A sharing process's thread count: the cores the fixed processes leave, split
// evenly between the sharing ones (remainders unused), capped at `cap` (the
// torchrun split), never below 1.
int share_of_cores(int cores, const SlotCensus& census, int cap);

// The registry folder: FTCORE_THREAD_REGISTRY when set (tests), else
// $XDG_RUNTIME_DIR/ftcore-threads, else /dev/shm/ftcore-threads-UID, else
// TMPDIR's ftcore-threads-UID. Per user: slots of other users are not seen.
std::filesystem::path default_registry_dir();

// One process's slot: taken on construction, released on destruction (or by
// the kernel when the process dies).
class ThreadRegistry {
 public:
  ThreadRegistry(std::filesystem::path dir, ThreadSlot mine);
  ~ThreadRegistry();
  ThreadRegistry(const ThreadRegistry&) = delete;
  ThreadRegistry& operator=(const ThreadRegistry&) = delete;

  // Live slots now (a directory scan, tens of microseconds); removes the
  // slots of dead holders on the way.
  SlotCensus census() const;
  const std::filesystem::path& slot_path() const { return slot_path_; }

 private:
  std::filesystem::path dir_, slot_path_;
  ThreadSlot mine_;
  int fd_ = -1;
};

}  // namespace ftcore

// Slot files of live ftcore processes (thread_registry.h).
//
// A slot is born locked: it is written as NAME.tmp, locked, then renamed to
// NAME.slot, so a reader never sees an unlocked .slot of a live process. Names
// are pid + random, never reused, so removing a dead holder's name can never
// remove a newer process's slot.
#include "thread_registry.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <system_error>

namespace fs = std::filesystem;

namespace ftcore {

namespace {

constexpr const char* kSlotExt = ".slot";
constexpr const char* kCreatingExt = ".tmp";
// A .tmp is locked right after it is created; one unlocked for this long is a
// creator that died in between.
constexpr auto kStaleCreation = std::chrono::seconds(60);

std::string slot_text(const ThreadSlot& slot) {
  return slot.fixed ? "fixed " + std::to_string(slot.threads) + "\n" : std::string("sharing\n");
}

// A holder's slot as it wrote it; text we cannot read counts as sharing (the
// cautious reading: it makes the reader take less).
ThreadSlot parse_slot(const std::string& text) {
  ThreadSlot slot;
  if (text.rfind("fixed ", 0) == 0) {
    const int n = std::atoi(text.c_str() + 6);
    if (n > 0) slot.fixed = true, slot.threads = n;
  }
  return slot;
}

std::string read_all(int fd) {
  char buffer[64] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

bool older_than(const fs::path& p, std::chrono::seconds age) {
  std::error_code ec;
  const auto written = fs::last_write_time(p, ec);
  return !ec && fs::file_time_type::clock::now() - written > age;
}

void add(SlotCensus& census, const ThreadSlot& slot) {
  if (slot.fixed)
    census.fixed_threads += slot.threads;
  else
    ++census.sharing;
}

}  // namespace

int share_of_cores(int cores, const SlotCensus& census, int cap) {
  const int left = cores - census.fixed_threads;
  const int share = left / std::max(census.sharing, 1);
  return std::max(1, std::min(share, std::max(cap, 1)));
}

fs::path default_registry_dir() {
  if (const char* dir = std::getenv("FTCORE_THREAD_REGISTRY"); dir && *dir) return dir;
  if (const char* run = std::getenv("XDG_RUNTIME_DIR"); run && *run && ::access(run, W_OK) == 0)
    return fs::path(run) / "ftcore-threads";
  const std::string mine = "ftcore-threads-" + std::to_string(::getuid());
  if (::access("/dev/shm", W_OK) == 0) return fs::path("/dev/shm") / mine;
  return fs::temp_directory_path() / mine;
}

ThreadRegistry::ThreadRegistry(fs::path dir, ThreadSlot mine) : dir_(std::move(dir)), mine_(mine) {
  std::error_code ec;
  if (fs::create_directories(dir_, ec)) fs::permissions(dir_, fs::perms::owner_all, ec);  // ours alone
  if (ec) throw std::runtime_error("cannot create the thread registry " + dir_.string() + ": " + ec.message());
  std::random_device random;
  const std::string name = std::to_string(::getpid()) + "-" + std::to_string(random()) + std::to_string(random());
  const fs::path creating = dir_ / (name + kCreatingExt);
  slot_path_ = dir_ / (name + kSlotExt);
  // O_CLOEXEC: a child exec'd by this process must not inherit the lock and
  // keep a dead parent's slot alive.
  fd_ = ::open(creating.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0) throw std::runtime_error("cannot create " + creating.string() + ": " + std::strerror(errno));
  const std::string text = slot_text(mine_);
  if (::flock(fd_, LOCK_EX) != 0 || ::write(fd_, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
      ::rename(creating.c_str(), slot_path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    ::unlink(creating.c_str());
    fd_ = -1;
    throw std::runtime_error("cannot take a slot in the thread registry " + dir_.string() + ": " + why);
  }
}

ThreadRegistry::~ThreadRegistry() {
  if (fd_ < 0) return;
  ::unlink(slot_path_.c_str());  // before the lock drops: no reader sees it unlocked
  ::close(fd_);
}

SlotCensus ThreadRegistry::census() const {
  SlotCensus census;
  add(census, mine_);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const fs::path& p = entry.path();
    const std::string ext = p.extension().string();
    if (p == slot_path_ || (ext != kSlotExt && ext != kCreatingExt)) continue;
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // removed meanwhile
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {  // nobody holds it: its holder is dead
      if (ext == kSlotExt || older_than(p, kStaleCreation)) ::unlink(p.c_str());
    } else if (ext == kSlotExt) {
      add(census, parse_slot(read_all(fd)));
    }
    ::close(fd);
  }
  return census;
}

}  // namespace ftcore

// The atomic file and folder writers (ftcore/atomic_file.h). POSIX calls
// rather than iostreams: their errno says why a write failed ("No space
// left on device"), which an ofstream's failbit does not.
#include "ftcore/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;

namespace ftcore {

namespace {

[[noreturn]] void throw_errno(const std::string& what, const fs::path& path, int error) {
  throw std::runtime_error(what + " " + path.string() + ": " + std::strerror(error));
}

fs::path with_suffix(const fs::path& path, const char* suffix) {
  fs::path out = path;
  out += suffix;
  return out;
}

fs::path parent_folder(const fs::path& path) {
  const fs::path parent = path.parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw std::runtime_error("cannot rename " + from.string() + " to " + to.string() + ": " + std::strerror(errno));
}

}  // namespace

void sync_to_disk(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path, errno);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Some filesystems cannot fsync a folder; the data itself is synced.
  if (result != 0 && !(error == EINVAL && fs::is_directory(path))) throw_errno("cannot sync", path, error);
}

AtomicFile::AtomicFile(fs::path path) : path_(std::move(path)), tmp_(with_suffix(path_, ".tmp")) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) throw_errno("cannot write", tmp_, errno);
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw std::logic_error("AtomicFile::write after commit: " + path_.string());
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot write", tmp_, errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw std::logic_error("AtomicFile::commit twice: " + path_.string());
  // Data reaches the disk before the name does: a crash leaves the old file or the new one.
  if (::fsync(fd_) != 0) throw_errno("cannot write", tmp_, errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {  // NFS and quotas report write errors here
    const int error = errno;
    ::unlink(tmp_.c_str());
    throw_errno("cannot write", tmp_, error);
  }
  rename_or_throw(tmp_, path_);
  committed_ = true;
  sync_to_disk(parent_folder(path_));
}

void write_file_atomically(const fs::path& path, std::string_view contents) {
  AtomicFile file(path);
  file.write(contents);
  file.commit();
}

void write_folder_atomically(const fs::path& requested, const std::function<void(const fs::path& tmp)>& fill) {
  // "out/" names the folder "out": its temporary is "out.tmp", not "out/.tmp" inside it.
  const fs::path dir = requested.has_filename() ? requested : requested.parent_path();
  const fs::path tmp = with_suffix(dir, ".tmp");
  try {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    fill(tmp);
    // Files copied in (not written through AtomicFile) are synced here too.
    for (const auto& entry : fs::recursive_directory_iterator(tmp))
      if (entry.is_regular_file() || entry.is_directory()) sync_to_disk(entry.path());
    sync_to_disk(tmp);
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
  if (fs::exists(dir)) {
    // Replacing a folder: `dir` is whole at every moment but the one between
    // the two renames, and then <dir>.old is (a reader of checkpoints
    // restores it, see train/checkpoint.cpp).
    const fs::path old = with_suffix(dir, ".old");
    fs::remove_all(old);
    rename_or_throw(dir, old);
    try {
      rename_or_throw(tmp, dir);
    } catch (...) {
      std::error_code ignored;
      fs::rename(old, dir, ignored);  // put the previous folder back
      fs::remove_all(tmp, ignored);
      throw;
    }
    fs::remove_all(old);
  } else {
    rename_or_throw(tmp, dir);
  }
  sync_to_disk(parent_folder(dir));
}

}  // namespace ftcore

// Every output ftcore writes (safetensors files, checkpoints, recipe.lock.toml,
// HF folders from convert / merge / quantize) goes through these two helpers,
// so a crash, a kill or a full disk never leaves a half-written file or folder
// under its final name: the old one stays, or the new one is complete.
//
//   file:   write <path>.tmp, fsync it, rename it to <path>, fsync the parent folder
//   folder: fill <dir>.tmp, fsync every file and the folder, swap it into place
//           (an existing <dir> is renamed to <dir>.old first and removed last),
//           fsync the parent folder
//
// Errors are std::runtime_error naming the path and the system's reason
// ("cannot write runs/a/x.tmp: No space left on device"); a write that
// fails removes its .tmp.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace ftcore {

// A file written under <path>.tmp and renamed into place by commit(). Not
// committed (an exception, an early return), the destructor removes the
// .tmp and `path` is untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // fsync, close, rename to the final name, fsync the parent folder.
  void commit();

  const std::filesystem::path& path() const { return path_; }

 private:
  void discard() noexcept;

  std::filesystem::path path_;
  std::filesystem::path tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole file at once.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

// Creates <dir>.tmp (removing a stale one), lets `fill` write the folder's
// contents into it, then makes it durable and swaps it into place as above.
// If `fill` throws, <dir>.tmp is removed and `dir` is untouched; a process
// killed inside `fill` leaves <dir>.tmp behind for the next start to remove.
void write_folder_atomically(const std::filesystem::path& dir,
                             const std::function<void(const std::filesystem::path& tmp)>& fill);

// fsync of one file or folder; throws naming it.
void sync_to_disk(const std::filesystem::path& path);

}  // namespace ftcore

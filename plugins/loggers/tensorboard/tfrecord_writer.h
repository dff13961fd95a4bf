// A TFRecord file writer: the framing TensorBoard event files use.
// Each record on disk is
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
//   | data[length]                | uint32 masked_crc32c(data)
// so a reader can tell a truncated or corrupted tail from a valid record.
// (tensorflow/core/lib/io/record_writer.cc describes the same layout.)
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace ftcore::tensorboard {

class TfRecordWriter {
 public:
  // Creates `path`; throws std::runtime_error when it exists or cannot be
  // created, so two writers never interleave records in one file.
  explicit TfRecordWriter(const std::filesystem::path& path);
  ~TfRecordWriter();
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  // Appends one framed record (buffered). False on an I/O error; error() says which.
  bool write(std::string_view data);
  // Hands buffered records to the OS so other processes see them.
  bool flush();
  // Flushes and closes; later calls do nothing.
  bool close();

  const std::filesystem::path& path() const { return path_; }
  const std::string& error() const { return error_; }

 private:
  bool fail(const char* what);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::string error_;
};

}  // namespace ftcore::tensorboard

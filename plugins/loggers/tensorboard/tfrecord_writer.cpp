// TFRecord framing with masked CRC-32C (see tfrecord_writer.h).
#include "tfrecord_writer.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "crc32c.h"

namespace ftcore::tensorboard {
namespace {

void append_little_endian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

TfRecordWriter::TfRecordWriter(const std::filesystem::path& path) : path_(path) {
  // "x": fail if the file exists (C11 / glibc), never append to another writer's file.
  file_ = std::fopen(path.c_str(), "wbx");
  if (!file_)
    throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
}

TfRecordWriter::~TfRecordWriter() { close(); }

bool TfRecordWriter::fail(const char* what) {
  error_ = std::string(what) + " " + path_.string() + ": " + std::strerror(errno);
  return false;
}

bool TfRecordWriter::write(std::string_view data) {
  if (!file_) {
    errno = EBADF;
    return fail("write to closed");
  }
  // One contiguous buffer per record, so a record is handed to stdio whole.
  std::string frame;
  frame.reserve(data.size() + 16);
  append_little_endian(frame, data.size(), 8);
  append_little_endian(frame, mask_crc32c(crc32c(frame.data(), 8)), 4);
  frame.append(data.data(), data.size());
  append_little_endian(frame, mask_crc32c(crc32c(data)), 4);
  if (std::fwrite(frame.data(), 1, frame.size(), file_) != frame.size()) return fail("cannot write");
  return true;
}

bool TfRecordWriter::flush() {
  if (!file_) return true;
  if (std::fflush(file_) != 0) return fail("cannot flush");
  return true;
}

bool TfRecordWriter::close() {
  if (!file_) return true;
  const bool flushed = std::fflush(file_) == 0;
  if (!flushed) fail("cannot flush");
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!closed && flushed) fail("cannot close");
  return flushed && closed;
}

}  // namespace ftcore::tensorboard

// The safetensors format, read and written here (no external library):
//   [u64 little-endian N][N bytes JSON header][data]
// The header maps tensor names to {dtype, shape, data_offsets: [begin, end)}
// relative to the data section, plus an optional "__metadata__" string map.
// Reading checks everything a malformed or hostile file could get wrong
// (lengths, JSON, dtypes, shapes, offsets inside the file, sizes matching
// shapes, no overlaps) and names the file, tensor and byte offset in errors.
// Files are memory-mapped; tensors are views that keep the mapping alive.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ftcore/sdk/tensor_map.h"

namespace ftcore::safetensors {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TensorEntry {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
};

class File {
 public:
  // Maps and validates; throws FormatError.
  static std::shared_ptr<File> open(const std::filesystem::path& path);
  ~File();

  const std::vector<TensorEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorEntry* find(const std::string& name) const;
  // A CPU tensor over the mapped bytes (copied when misaligned); keeps the file mapped.
  at::Tensor tensor(const std::string& name) const;
  // Every tensor, in file order, with the metadata.
  sdk::TensorMap read_all() const;

 private:
  File() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 0;
  std::vector<TensorEntry> entries_;
  std::map<std::string, std::string> metadata_;
  std::weak_ptr<File> self_;
};

// Drops the pages of a tensor File::tensor returned from this process's
// resident memory (any other tensor: nothing happens). For readers that copy a
// mapped tensor once: a model's weights copied into its parameters otherwise
// stay resident as file pages beside the copy until the file is unmapped, so
// loading the default model's 538 MB of fp32 weights peaked at twice that.
// Reading the tensor again is still right: the mapping is private and never
// written, so the kernel faults the same bytes back in from the file.
void release_mapped_pages(const at::Tensor& tensor);

// Writes `tensors` (contiguous CPU copies are made as needed) to `path`
// through a temporary file renamed into place, so a crash never leaves a
// half-written file under the final name.
void write_file(const std::filesystem::path& path, const sdk::TensorMap& tensors);

const char* dtype_name(at::ScalarType dtype);  // "F32", "BF16", ...

}  // namespace ftcore::safetensors

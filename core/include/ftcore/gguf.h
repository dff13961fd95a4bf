// GGUF (llama.cpp's model file), read here: versions 2 and 3; metadata of
// every value type (the tokenizer and chat template included); tensors F32,
// F16, BF16 and the block formats Q8_0, Q4_0, Q4_1 dequantized to fp32.
//
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 type, value),
//   tensor_count x (string name, u32 n_dims, u64 dims[n_dims] innermost first,
//                   u32 ggml_type, u64 offset), padding to general.alignment,
//   tensor data.
// Every count, length and offset is checked against the file; errors name
// the file, the key or tensor, and the byte offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ftcore::gguf {

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  UInt8 = 0, Int8 = 1, UInt16 = 2, Int16 = 3, UInt32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, UInt64 = 10, Int64 = 11, Float64 = 12,
};

// One metadata value. Scalars fill the matching field (integers in `i`,
// floats in `f`); arrays fill `strings`, `ints` or `floats` by element type.
struct Value {
  ValueType type = ValueType::UInt8;
  ValueType element_type = ValueType::UInt8;  // arrays only
  int64_t i = 0;
  double f = 0.0;
  bool b = false;
  std::string s;
  std::vector<std::string> strings;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

enum class TensorType : uint32_t { F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, BF16 = 30 };
const char* tensor_type_name(TensorType type);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // PyTorch order (outermost first): GGUF dims reversed
  TensorType type = TensorType::F32;
  uint64_t offset = 0;         // absolute byte offset in the file
  uint64_t nbytes = 0;
};

class File {
 public:
  static std::shared_ptr<File> open(const std::filesystem::path& path);
  ~File();

  uint32_t version() const { return version_; }
  const std::map<std::string, Value>& metadata() const { return metadata_; }
  const Value* find_metadata(const std::string& key) const;
  // Typed metadata lookups; throw FormatError naming the key when absent or mistyped.
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(const std::string& name) const;
  // The tensor dequantized to fp32, in PyTorch order.
  at::Tensor dequantize(const std::string& name) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  File() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
};

// Dequantizes `count` elements of `type` from `data` into `out` (fp32).
void dequantize_blocks(TensorType type, const uint8_t* data, int64_t count, float* out);
// Bytes that `count` elements of `type` occupy; throws when count is not a
// whole number of blocks.
uint64_t bytes_for(TensorType type, int64_t count, const std::string& tensor_name);

}  // namespace ftcore::gguf

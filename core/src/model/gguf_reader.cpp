// GGUF parsing: header, metadata, tensor table; every read bounds-checked.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <ATen/ATen.h>

#include "ftcore/gguf.h"

namespace fs = std::filesystem;

namespace ftcore::gguf {

namespace {

constexpr uint64_t kMaxStringBytes = 1ull << 30;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// Reads little-endian values from the mapped file, refusing to step outside it.
class Cursor {
 public:
  Cursor(const fs::path& path, const uint8_t* data, size_t size) : path_(path), data_(data), size_(size) {}

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > kMaxStringBytes) fail(std::string(what) + ": string length " + std::to_string(n) + " is implausible");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  void need(uint64_t n, const std::string& what) {
    if (n > size_ - pos_)
      fail(what + ": needs " + std::to_string(n) + " bytes, the file ends " + std::to_string(size_ - pos_) +
           " bytes later");
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw FormatError(path_.string() + ": at byte " + std::to_string(pos_) + ": " + message);
  }

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }

 private:
  fs::path path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

int64_t read_integer(Cursor& c, ValueType t, const char* what) {
  switch (t) {
    case ValueType::UInt8: return c.read<uint8_t>(what);
    case ValueType::Int8: return c.read<int8_t>(what);
    case ValueType::UInt16: return c.read<uint16_t>(what);
    case ValueType::Int16: return c.read<int16_t>(what);
    case ValueType::UInt32: return c.read<uint32_t>(what);
    case ValueType::Int32: return c.read<int32_t>(what);
    case ValueType::UInt64: return static_cast<int64_t>(c.read<uint64_t>(what));
    case ValueType::Int64: return c.read<int64_t>(what);
    default: c.fail(std::string(what) + ": not an integer type");
  }
}

bool is_integer(ValueType t) {
  return t == ValueType::UInt8 || t == ValueType::Int8 || t == ValueType::UInt16 || t == ValueType::Int16 ||
         t == ValueType::UInt32 || t == ValueType::Int32 || t == ValueType::UInt64 || t == ValueType::Int64;
}

Value read_value(Cursor& c, ValueType t, const std::string& key) {
  Value v;
  v.type = t;
  const char* what = key.c_str();
  if (is_integer(t)) {
    v.i = read_integer(c, t, what);
  } else if (t == ValueType::Float32) {
    v.f = c.read<float>(what);
  } else if (t == ValueType::Float64) {
    v.f = c.read<double>(what);
  } else if (t == ValueType::Bool) {
    v.b = c.read<uint8_t>(what) != 0;
  } else if (t == ValueType::String) {
    v.s = c.read_string(what);
  } else if (t == ValueType::Array) {
    v.element_type = static_cast<ValueType>(c.read<uint32_t>(what));
    const uint64_t n = c.read<uint64_t>(what);
    if (n > c.size()) c.fail(key + ": array length " + std::to_string(n) + " exceeds the file size");
    const ValueType e = v.element_type;
    for (uint64_t k = 0; k < n; ++k) {
      if (e == ValueType::String) v.strings.push_back(c.read_string(what));
      else if (is_integer(e)) v.ints.push_back(read_integer(c, e, what));
      else if (e == ValueType::Float32) v.floats.push_back(c.read<float>(what));
      else if (e == ValueType::Float64) v.floats.push_back(c.read<double>(what));
      else if (e == ValueType::Bool) v.ints.push_back(c.read<uint8_t>(what) != 0);
      else c.fail(key + ": arrays of type " + std::to_string(static_cast<uint32_t>(e)) + " are not supported");
    }
  } else {
    c.fail(key + ": unknown value type " + std::to_string(static_cast<uint32_t>(t)));
  }
  return v;
}

bool known_tensor_type(uint32_t t) {
  return t == 0 || t == 1 || t == 2 || t == 3 || t == 8 || t == 30;
}

}  // namespace

std::shared_ptr<File> File::open(const fs::path& path) {
  std::shared_ptr<File> file(new File());
  file->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FormatError(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      throw FormatError(path.string() + ": cannot mmap: " + std::strerror(errno));
    }
    file->map_ = map;
  }
  ::close(fd);
  Cursor c(path, static_cast<const uint8_t*>(file->map_), file->size_);
  c.need(4, "magic");
  if (std::memcmp(file->map_, "GGUF", 4) != 0) c.fail("not a GGUF file (magic is not \"GGUF\")");
  c.read<uint32_t>("magic");
  file->version_ = c.read<uint32_t>("version");
  if (file->version_ != 2 && file->version_ != 3)
    c.fail("GGUF version " + std::to_string(file->version_) + " is not supported (2 and 3 are)");
  const uint64_t tensor_count = c.read<uint64_t>("tensor_count");
  const uint64_t kv_count = c.read<uint64_t>("kv_count");
  if (tensor_count > file->size_ / 24 || kv_count > file->size_ / 12)
    c.fail("tensor_count " + std::to_string(tensor_count) + " or kv_count " + std::to_string(kv_count) +
           " cannot fit in a file of " + std::to_string(file->size_) + " bytes");
  for (uint64_t k = 0; k < kv_count; ++k) {
    std::string key = c.read_string("metadata key");
    auto type = static_cast<ValueType>(c.read<uint32_t>(key.c_str()));
    file->metadata_[key] = read_value(c, type, key);
  }
  for (uint64_t k = 0; k < tensor_count; ++k) {
    TensorInfo t;
    t.name = c.read_string("tensor name");
    const uint32_t n_dims = c.read<uint32_t>(t.name.c_str());
    if (n_dims == 0 || n_dims > kMaxDims) c.fail("tensor " + t.name + ": " + std::to_string(n_dims) + " dimensions");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>(t.name.c_str());
      if (dim == 0 || dim > (1ull << 40) || static_cast<uint64_t>(numel) > (1ull << 50) / dim)
        c.fail("tensor " + t.name + ": dimension " + std::to_string(dim) + " is out of range");
      numel *= static_cast<int64_t>(dim);
      t.shape.insert(t.shape.begin(), static_cast<int64_t>(dim));  // GGUF lists the innermost first
    }
    const uint32_t type = c.read<uint32_t>(t.name.c_str());
    if (!known_tensor_type(type))
      c.fail("tensor " + t.name + ": ggml type " + std::to_string(type) +
             " is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1 are)");
    t.type = static_cast<TensorType>(type);
    t.offset = c.read<uint64_t>(t.name.c_str());
    t.nbytes = bytes_for(t.type, numel, t.name);
    file->tensors_.push_back(std::move(t));
  }
  uint64_t alignment = 32;
  if (const Value* a = file->find_metadata("general.alignment")) alignment = static_cast<uint64_t>(a->i);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    c.fail("general.alignment " + std::to_string(alignment) + " is not a power of two");
  const uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
  for (auto& t : file->tensors_) {
    if (t.offset > file->size_ || data_start + t.offset > file->size_ ||
        t.nbytes > file->size_ - data_start - t.offset)
      throw FormatError(path.string() + ": tensor " + t.name + " at data offset " + std::to_string(t.offset) +
                        " (+" + std::to_string(t.nbytes) + " bytes) lies outside the file");
    t.offset += data_start;
  }
  return file;
}

File::~File() {
  if (map_) ::munmap(map_, size_);
}

const Value* File::find_metadata(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

int64_t File::get_int(const std::string& key) const {
  const Value* v = find_metadata(key);
  if (!v || !is_integer(v->type)) throw FormatError(path_.string() + ": metadata " + key + " is missing or not an integer");
  return v->i;
}

double File::get_float(const std::string& key) const {
  const Value* v = find_metadata(key);
  if (!v || (v->type != ValueType::Float32 && v->type != ValueType::Float64))
    throw FormatError(path_.string() + ": metadata " + key + " is missing or not a float");
  return v->f;
}

const std::string& File::get_string(const std::string& key) const {
  const Value* v = find_metadata(key);
  if (!v || v->type != ValueType::String) throw FormatError(path_.string() + ": metadata " + key + " is missing or not a string");
  return v->s;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

at::Tensor File::dequantize(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw FormatError(path_.string() + ": no tensor " + name);
  at::Tensor out = at::empty(t->shape, at::kFloat);
  dequantize_blocks(t->type, static_cast<const uint8_t*>(map_) + t->offset, out.numel(), out.data_ptr<float>());
  return out;
}

}  // namespace ftcore::gguf

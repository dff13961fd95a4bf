// safetensors reader (mmap, fully bounds-checked) and writer (through ftcore/atomic_file.h).
#include "ftcore/safetensors.h"

#include "ftcore/atomic_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace ftcore::safetensors {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat},  {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},    {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},  {"F8_E4M3", at::kFloat8_e4m3fn}, {"F8_E5M2", at::kFloat8_e5m2},
};

[[noreturn]] void fail(const fs::path& path, const std::string& message) {
  throw FormatError(path.string() + ": " + message);
}

TensorEntry parse_entry(const fs::path& path, const std::string& name, const nlohmann::json& j, uint64_t data_size) {
  auto where = [&](const std::string& what) { fail(path, "tensor '" + name + "': " + what); };
  if (!j.is_object()) where("header entry is not an object");
  TensorEntry e;
  e.name = name;
  auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string()) where("missing or non-string dtype");
  bool known = false;
  for (const auto& d : kDtypes)
    if (*dt == d.name) e.dtype = d.type, known = true;
  if (!known) where("unsupported dtype " + dt->get<std::string>());
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) where("missing shape");
  uint64_t numel = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned()) where("shape has a non-integer or negative dimension");
    uint64_t v = d.get<uint64_t>();
    if (v > (1ull << 48) || (v && numel > (1ull << 62) / v)) where("shape is too large");
    numel *= v;
    e.shape.push_back(static_cast<int64_t>(v));
  }
  auto offsets = j.find("data_offsets");
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    where("data_offsets must be two non-negative integers");
  e.begin = (*offsets)[0].get<uint64_t>();
  e.end = (*offsets)[1].get<uint64_t>();
  if (e.begin > e.end) where("data_offsets begin " + std::to_string(e.begin) + " > end " + std::to_string(e.end));
  if (e.end > data_size)
    where("data_offsets end " + std::to_string(e.end) + " is past the data section (" + std::to_string(data_size) +
          " bytes)");
  const uint64_t want = numel * at::elementSize(e.dtype);
  if (e.end - e.begin != want)
    where("holds " + std::to_string(e.end - e.begin) + " bytes, its dtype and shape need " + std::to_string(want));
  return e;
}

}  // namespace

const char* dtype_name(at::ScalarType dtype) {
  for (const auto& d : kDtypes)
    if (d.type == dtype) return d.name;
  throw FormatError(std::string("safetensors has no dtype for ") + c10::toString(dtype));
}

namespace {

// What a mapped tensor's storage holds: the file, kept mapped while it lives.
struct MappedView {
  std::shared_ptr<const File> file;
};

void release_view(void* context) { delete static_cast<MappedView*>(context); }

}  // namespace

std::shared_ptr<File> File::open(const fs::path& path) {
  std::shared_ptr<File> file(new File());
  file->self_ = file;
  file->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path, "cannot stat");
  }
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ < 8) {
    ::close(fd);
    fail(path, "file is " + std::to_string(file->size_) + " bytes, shorter than the 8-byte header length");
  }
  // Read-only: release_mapped_pages may drop pages because none is ever written
  // (with PROT_WRITE, dropping a written page would lose what was written).
  void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) fail(path, std::string("cannot mmap: ") + std::strerror(errno));
  file->map_ = map;
  const auto* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > file->size_ - 8)
    fail(path, "header length " + std::to_string(header_len) + " (at byte 0) exceeds the file size " +
                   std::to_string(file->size_) + " or the 100 MiB limit");
  file->data_start_ = 8 + header_len;
  const uint64_t data_size = file->size_ - file->data_start_;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, "header JSON is malformed at byte " + std::to_string(8 + e.byte) + ": " + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double (out_of_range 406)
    fail(path, std::string("header JSON (from byte 8) is not readable: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object (at byte 8)");
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(path, "__metadata__ value for '" + k + "' is not a string");
        file->metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    file->entries_.push_back(parse_entry(path, name, value, data_size));
  }
  std::vector<const TensorEntry*> by_offset;
  for (const auto& e : file->entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      fail(path, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap at data byte " +
                     std::to_string(by_offset[i]->begin));
  }
  std::sort(file->entries_.begin(), file->entries_.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  return file;
}

File::~File() {
  if (map_) ::munmap(map_, size_);
}

const TensorEntry* File::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

at::Tensor File::tensor(const std::string& name) const {
  const TensorEntry* e = find(name);
  if (!e) fail(path_, "has no tensor '" + name + "'");
  auto* data = static_cast<uint8_t*>(map_) + data_start_ + e->begin;
  const auto options = at::TensorOptions().dtype(e->dtype).device(at::kCPU);
  if (e->end == e->begin) return at::empty(e->shape, options);
  if (reinterpret_cast<uintptr_t>(data) % at::elementSize(e->dtype) != 0)
    return at::from_blob(data, e->shape, options).clone();
  // The storage's context keeps the file mapped; its deleter also marks the
  // tensor as a view of a mapping for release_mapped_pages.
  auto* keep = new MappedView{self_.lock()};
  return at::for_blob(data, e->shape).options(options).context(keep, &release_view).make_tensor();
}

void release_mapped_pages(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return;
  const c10::Storage& storage = tensor.storage();
  if (storage.data_ptr().get_deleter() != &release_view || storage.nbytes() == 0) return;
  // Whole pages around the tensor's bytes: the mapping starts on a page and
  // spans whole pages, so they lie in it; a neighbour's page dropped too is
  // faulted back in from the file when it is read.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(storage.data()) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(storage.data()) + storage.nbytes() + page - 1) & ~(page - 1);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

sdk::TensorMap File::read_all() const {
  sdk::TensorMap out;
  for (const auto& e : entries_) out.add(e.name, tensor(e.name));
  out.metadata = metadata_;
  return out;
}

void write_file(const fs::path& path, const sdk::TensorMap& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!tensors.metadata.empty()) header["__metadata__"] = tensors.metadata;
  std::vector<at::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors.tensors) {
    if (header.contains(name)) throw FormatError("cannot write " + path.string() + ": tensor name '" + name + "' appears twice");
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const uint64_t bytes = c.numel() * c.element_size();
    header[name] = {{"dtype", dtype_name(c.scalar_type())}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(std::move(c));
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data section 8-byte aligned
  AtomicFile out(path);
  const uint64_t n = text.size();
  char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.write(len, 8);
  out.write(text);
  for (const auto& c : contiguous) out.write(c.data_ptr(), c.numel() * c.element_size());
  out.commit();
}

}  // namespace ftcore::safetensors

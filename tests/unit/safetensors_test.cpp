// The safetensors reader/writer against the reference `safetensors` package
// (files written by Python load here and ours load there, bit for bit), and
// against malformed files: each gives a FormatError naming the file and what
// is wrong, and random corruption never crashes the reader.
#include <fstream>
#include <random>
#include <sstream>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "ftcore/safetensors.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ftcore;

namespace {

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with the given header text and `data_bytes` zero bytes of data.
std::string file_with_header(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data_bytes, '\0');
}

// The kernel's count of this process's resident kB in the mapping that holds
// `address` (/proc/self/smaps: a range line, then its fields, Rss among them).
long resident_kb_of_mapping(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(address);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if ((range >> std::hex >> begin >> dash >> end) && dash == '-') {  // a field line fails here
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      return std::stol(line.substr(4));
    }
  }
  return -1;
}

std::string error_of(const fs::path& p) {
  try {
    safetensors::File::open(p);
  } catch (const safetensors::FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, ReadsWhatTheReferencePackageWritesAndViceVersa) {
  ftcore::testing::TempDir dir;
  // Python writes tensors of several dtypes and metadata, and prints their digests.
  ftcore::testing::run_python("unit/safetensors_reference.py", "write " + (dir / "py.safetensors").string());
  auto file = safetensors::File::open(dir / "py.safetensors");
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->tensor("f32").scalar_type(), at::kFloat);
  EXPECT_EQ(file->tensor("bf16").scalar_type(), at::kBFloat16);
  EXPECT_EQ(file->tensor("i64").sizes(), (at::IntArrayRef{3}));
  EXPECT_EQ(file->tensor("empty").numel(), 0);
  // The values equal the generator the script used (arange-based, exactly representable).
  EXPECT_TRUE(at::equal(file->tensor("f32"), at::arange(24, at::kFloat).reshape({2, 3, 4}) / 8));
  EXPECT_TRUE(at::equal(file->tensor("bf16"), (at::arange(10, at::kFloat) - 5).to(at::kBFloat16)));
  EXPECT_TRUE(at::equal(file->tensor("i64"), at::tensor({-1, 0, 7}, at::kLong)));

  // Ours, read by the reference package, which checks values and metadata itself.
  sdk::TensorMap ours;
  ours.add("f32", at::arange(24, at::kFloat).reshape({2, 3, 4}) / 8);
  ours.add("bf16", (at::arange(10, at::kFloat) - 5).to(at::kBFloat16));
  ours.add("i64", at::tensor({-1, 0, 7}, at::kLong));
  ours.add("f16.transposed", at::arange(6, at::kFloat).reshape({2, 3}).t().to(at::kHalf));
  ours.add("empty", at::empty({0, 4}));
  ours.add("scalar", at::scalar_tensor(42, at::kLong));
  ours.metadata["format"] = "pt";
  safetensors::write_file(dir / "ours.safetensors", ours);
  ftcore::testing::run_python("unit/safetensors_reference.py", "check " + (dir / "ours.safetensors").string());
  EXPECT_FALSE(fs::exists(dir / "ours.safetensors.tmp")) << "the temporary file must be renamed away";
}

// Loading a model copies each mapped tensor into its parameter and releases the
// file's pages (Model::load_weights): the kernel's Rss of the mapping falls by
// the tensor's size, the tensor still reads its bytes, and a tensor that is
// not a view of a file is left as it is (dropping heap pages would zero them).
TEST(Safetensors, ReleasedMappedPagesLeaveTheProcessAndReadTheSameBytes) {
  ftcore::testing::TempDir dir;
  const at::Tensor values = at::arange(1 << 20, at::kFloat);  // 4 MiB, 1,024 pages
  sdk::TensorMap map;
  map.add("values", values);
  safetensors::write_file(dir / "values.safetensors", map);
  auto file = safetensors::File::open(dir / "values.safetensors");
  const at::Tensor view = file->tensor("values");
  ASSERT_TRUE(at::equal(view, values));  // reads every page
  const long before = resident_kb_of_mapping(view.data_ptr());
  ASSERT_GE(before, 4096);
  safetensors::release_mapped_pages(view);
  const long after = resident_kb_of_mapping(view.data_ptr());
  EXPECT_LE(after, before - 4096) << "Rss of the mapping before " << before << " kB, after " << after << " kB";
  EXPECT_TRUE(at::equal(view, values));

  const at::Tensor heap = values.clone();
  safetensors::release_mapped_pages(heap);
  EXPECT_TRUE(at::equal(heap, values));
  safetensors::release_mapped_pages(at::Tensor());
}

TEST(Safetensors, MalformedFilesAreRefusedWithTheFileAndTheReason) {
  ftcore::testing::TempDir dir;
  struct Case {
    std::string name, bytes, expected;
  };
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<Case> cases = {
      {"short", "abc", "shorter than the 8-byte header length"},
      {"huge_header", std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + "{}", "header length 4294967295"},
      {"bad_json", file_with_header(R"({"t":{"dtype":)", 0), "header JSON is malformed at byte"},
      {"not_object", file_with_header("[1,2]", 0), "header is not a JSON object"},
      {"bad_dtype", file_with_header(R"({"t":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor 't': unsupported dtype F31"},
      {"negative_dim", file_with_header(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
       "negative dimension"},
      {"past_end", file_with_header("{" + ok_entry + "}", 4), "past the data section (4 bytes)"},
      {"size_mismatch", file_with_header(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "holds 8 bytes, its dtype and shape need 12"},
      {"reversed", file_with_header(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
       "begin 8 > end 0"},
      {"overlap", file_with_header("{" + ok_entry + R"(,"u":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
       "overlap at data byte 4"},
      {"bad_metadata", file_with_header(R"({"__metadata__":{"a":1}})", 0), "__metadata__ value for 'a' is not a string"},
      // Found by the fuzzer: nlohmann throws out_of_range, not parse_error, for a number past a double.
      {"number_overflow", file_with_header(R"({"t":{"dtype":"F32","shape":[7770000000E0000000001084950816],"data_offsets":[0,8]}})", 8),
       "header JSON (from byte 8) is not readable"},
  };
  for (const auto& c : cases) {
    const fs::path p = dir / (c.name + ".safetensors");
    write_bytes(p, c.bytes);
    const std::string message = error_of(p);
    EXPECT_NE(message.find(p.string()), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.name << ": " << message;
  }
}

TEST(Safetensors, RandomCorruptionNeverCrashesTheReader) {
  ftcore::testing::TempDir dir;
  sdk::TensorMap good;
  good.add("a", at::randn({7, 5}));
  good.add("b", at::arange(9, at::kLong));
  good.metadata["k"] = "v";
  safetensors::write_file(dir / "good.safetensors", good);
  const std::string original = read_bytes(dir / "good.safetensors");
  std::mt19937 rng(1234);
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bytes = original;
    switch (i % 3) {
      case 0: bytes[rng() % bytes.size()] = static_cast<char>(rng()); break;  // flip a byte
      case 1: bytes.resize(rng() % bytes.size()); break;                       // truncate
      case 2: bytes.insert(rng() % bytes.size(), 1, "{}[]\",:0\x80"[rng() % 9]); break;
    }
    const fs::path p = dir / "mutated.safetensors";
    write_bytes(p, bytes);
    try {
      auto f = safetensors::File::open(p);
      for (const auto& e : f->entries()) (void)f->tensor(e.name).sum().item<double>();  // touch every byte
    } catch (const safetensors::FormatError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 100) << "most corruptions must be detected";
}

// The GGUF reader against the `gguf` package: metadata of every value type
// and tensors in every supported format (F32, F16, BF16, Q8_0, Q4_0, Q4_1),
// dequantized to exactly what gguf.quants.dequantize gives; malformed files
// are refused with the file and byte offset, and never crash the reader.
#include <fstream>
#include <random>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "ftcore/gguf.h"
#include "ftcore/safetensors.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ftcore;

namespace {

struct Written {
  ftcore::testing::TempDir dir;
  fs::path gguf, expected;
  Written() : gguf(dir / "t.gguf"), expected(dir / "expected.safetensors") {
    ftcore::testing::run_python("unit/gguf_reference.py", gguf.string() + " " + expected.string());
  }
};

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST(Gguf, ReadsMetadataOfEveryValueType) {
  Written w;
  auto f = gguf::File::open(w.gguf);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("test.u32"), 4000000000LL);
  EXPECT_EQ(f->get_int("test.i32"), -123);
  EXPECT_EQ(f->get_int("test.u64"), (1LL << 40) + 3);
  EXPECT_EQ(f->get_int("test.i8"), -5);
  EXPECT_EQ(f->get_float("test.f32"), 0.25);
  EXPECT_EQ(f->get_float("test.f64"), -1.5e-7);
  EXPECT_TRUE(f->find_metadata("test.bool")->b);
  EXPECT_EQ(f->get_string("test.str"), "héllo <|im_start|>");
  EXPECT_EQ(f->find_metadata("test.strs")->strings, (std::vector<std::string>{"a", "bb", "", "ü"}));
  EXPECT_EQ(f->find_metadata("test.ints")->ints, (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f->find_metadata("test.floats")->floats, (std::vector<double>{0.5, 1.5}));
}

TEST(Gguf, DequantizesEveryFormatExactlyAsTheGgufPackage) {
  Written w;
  auto f = gguf::File::open(w.gguf);
  auto expected = safetensors::File::open(w.expected);
  ASSERT_EQ(f->tensors().size(), expected->entries().size());
  for (const auto& e : expected->entries()) {
    at::Tensor want = expected->tensor(e.name);
    at::Tensor got = f->dequantize(e.name);
    EXPECT_EQ(got.sizes(), want.sizes()) << e.name;
    EXPECT_TRUE(at::equal(got, want)) << e.name << " (" << gguf::tensor_type_name(f->find_tensor(e.name)->type)
                                      << "): max diff " << (got - want).abs().max().item<float>();
  }
}

TEST(Gguf, MalformedFilesAreRefusedWithTheByteOffset) {
  Written w;
  const std::string good = read_bytes(w.gguf);
  auto error_of = [&](const std::string& bytes) -> std::string {
    const fs::path p = w.dir / "bad.gguf";
    write_bytes(p, bytes);
    try {
      gguf::File::open(p);
    } catch (const gguf::FormatError& e) {
      return e.what();
    }
    return "";
  };
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  EXPECT_NE(error_of(bad_magic).find("not a GGUF file"), std::string::npos);
  std::string v9 = good;
  v9[4] = 9;
  EXPECT_NE(error_of(v9).find("GGUF version 9 is not supported"), std::string::npos);
  std::string huge = good;
  for (int i = 8; i < 16; ++i) huge[i] = '\x7f';
  EXPECT_NE(error_of(huge).find("cannot fit in a file"), std::string::npos) << error_of(huge);
  const std::string truncated_header = error_of(good.substr(0, 200));
  EXPECT_NE(truncated_header.find("at byte"), std::string::npos) << truncated_header;
  EXPECT_NE(truncated_header.find("the file ends"), std::string::npos) << truncated_header;
  const std::string truncated_data = error_of(good.substr(0, good.size() - 100));
  EXPECT_NE(truncated_data.find("lies outside the file"), std::string::npos) << truncated_data;
  EXPECT_NE(error_of("GG").find("needs 4 bytes"), std::string::npos);
}

TEST(Gguf, RandomCorruptionNeverCrashesTheReader) {
  Written w;
  const std::string good = read_bytes(w.gguf);
  std::mt19937 rng(99);
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bytes = good;
    // Corrupt the header region, where parsing decisions are made.
    const size_t header = std::min<size_t>(bytes.size(), 1200);
    switch (i % 3) {
      case 0: bytes[rng() % header] = static_cast<char>(rng()); break;
      case 1: bytes.resize(rng() % bytes.size()); break;
      case 2: bytes.insert(rng() % header, 4, static_cast<char>(rng())); break;
    }
    const fs::path p = w.dir / "mutated.gguf";
    write_bytes(p, bytes);
    try {
      auto f = gguf::File::open(p);
      for (const auto& t : f->tensors()) (void)f->dequantize(t.name).sum().item<float>();
    } catch (const gguf::FormatError&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 50);
}

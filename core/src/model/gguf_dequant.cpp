// GGUF tensor formats to fp32. Block formats hold 32 elements per block:
//   Q8_0: f16 d, int8 q[32]           x = q * d
//   Q4_0: f16 d, u8 q[16]             x = (nibble - 8) * d
//   Q4_1: f16 d, f16 m, u8 q[16]      x = nibble * d + m
// where byte j holds element j in its low nibble and element j + 16 in its
// high nibble (ggml's layout).
#include <cstring>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "ftcore/gguf.h"
#include "ftcore/sdk/parallel.h"

namespace ftcore::gguf {

namespace {

constexpr int64_t kBlock = 32;

float half_at(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}

void q8_0(const uint8_t* block, float* out) {
  const float d = half_at(block);
  const auto* q = reinterpret_cast<const int8_t*>(block + 2);
  for (int j = 0; j < kBlock; ++j) out[j] = static_cast<float>(q[j]) * d;
}

void q4_0(const uint8_t* block, float* out) {
  const float d = half_at(block);
  const uint8_t* q = block + 2;
  for (int j = 0; j < kBlock / 2; ++j) {
    out[j] = static_cast<float>((q[j] & 0x0f) - 8) * d;
    out[j + kBlock / 2] = static_cast<float>((q[j] >> 4) - 8) * d;
  }
}

void q4_1(const uint8_t* block, float* out) {
  const float d = half_at(block), m = half_at(block + 2);
  const uint8_t* q = block + 4;
  for (int j = 0; j < kBlock / 2; ++j) {
    out[j] = static_cast<float>(q[j] & 0x0f) * d + m;
    out[j + kBlock / 2] = static_cast<float>(q[j] >> 4) * d + m;
  }
}

struct Format {
  int64_t block_elements;
  int64_t block_bytes;
};

Format format_of(TensorType type) {
  switch (type) {
    case TensorType::F32: return {1, 4};
    case TensorType::F16: return {1, 2};
    case TensorType::BF16: return {1, 2};
    case TensorType::Q8_0: return {32, 34};
    case TensorType::Q4_0: return {32, 18};
    case TensorType::Q4_1: return {32, 20};
  }
  throw FormatError("unknown ggml type");
}

}  // namespace

const char* tensor_type_name(TensorType type) {
  switch (type) {
    case TensorType::F32: return "F32";
    case TensorType::F16: return "F16";
    case TensorType::BF16: return "BF16";
    case TensorType::Q8_0: return "Q8_0";
    case TensorType::Q4_0: return "Q4_0";
    case TensorType::Q4_1: return "Q4_1";
  }
  return "?";
}

uint64_t bytes_for(TensorType type, int64_t count, const std::string& tensor_name) {
  const Format f = format_of(type);
  if (count % f.block_elements != 0)
    throw FormatError("tensor " + tensor_name + ": " + std::to_string(count) + " elements are not whole " +
                      tensor_type_name(type) + " blocks of " + std::to_string(f.block_elements));
  return static_cast<uint64_t>(count / f.block_elements * f.block_bytes);
}

void dequantize_blocks(TensorType type, const uint8_t* data, int64_t count, float* out) {
  const Format f = format_of(type);
  const int64_t blocks = count / f.block_elements;
  sdk::parallel_for(0, blocks, 4096, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const uint8_t* in = data + b * f.block_bytes;
      float* o = out + b * f.block_elements;
      switch (type) {
        case TensorType::F32: std::memcpy(o, in, 4); break;
        case TensorType::F16: *o = half_at(in); break;
        case TensorType::BF16: {
          uint16_t bits;
          std::memcpy(&bits, in, 2);
          *o = static_cast<float>(c10::BFloat16(bits, c10::BFloat16::from_bits()));
          break;
        }
        case TensorType::Q8_0: q8_0(in, o); break;
        case TensorType::Q4_0: q4_0(in, o); break;
        case TensorType::Q4_1: q4_1(in, o); break;
      }
    }
  });
}

}  // namespace ftcore::gguf

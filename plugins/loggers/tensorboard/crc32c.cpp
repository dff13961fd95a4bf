// Table-driven CRC-32C, one byte per step. Event files are small (a record per
// logging step), so the 8x of slicing or SSE4.2 would not show in a run.
#include "crc32c.h"

#include <array>

namespace ftcore::tensorboard {
namespace {

constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;

// table[b] is the CRC register after shifting byte b through eight bit steps.
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kReflectedPolynomial : 0u);
    table[b] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = kTable[(crc ^ bytes[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

}  // namespace ftcore::tensorboard

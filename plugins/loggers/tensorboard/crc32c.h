// CRC-32C (Castagnoli), the checksum TFRecord framing uses, and TensorFlow's
// "masked" form of it. Masking exists because a CRC stored next to the data
// it covers is itself CRC'd by readers that checksum larger spans; rotating
// and offsetting it keeps such nested checksums from degenerating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ftcore::tensorboard {

// Reflected CRC-32C (Boost.CRC): polynomial 0x1EDC6F41 (0x82F63B78 bit-reversed), initial
// value and final xor 0xFFFFFFFF. crc32c("123456789") == 0xE3069283.
uint32_t crc32c(const void* data, size_t size);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

// TensorFlow's mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32.
inline uint32_t mask_crc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace ftcore::tensorboard

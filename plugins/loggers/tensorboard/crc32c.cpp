// CRC-32C by Boost.CRC (header-only): Castagnoli's polynomial, reflected in
// and out, initial value and final xor 0xFFFFFFFF, as TFRecord specifies.
#include "crc32c.h"

#include <boost/crc.hpp>

namespace ftcore::tensorboard {

uint32_t crc32c(const void* data, size_t size) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, size);
  return crc.checksum();
}

}  // namespace ftcore::tensorboard

// Protocol-buffer wire encoding for the event-file messages (see proto_writer.h).
#include "proto_writer.h"

#include <bit>

namespace ftcore::tensorboard {

void ProtoWriter::put_key(uint32_t field, WireType type) {
  put_varint((static_cast<uint64_t>(field) << 3) | type);
}

// Seven bits per byte, least significant group first, high bit set on every
// byte but the last.
void ProtoWriter::put_varint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

// Byte by byte, so the file is little-endian whatever the host is.
void ProtoWriter::put_little_endian(uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void ProtoWriter::add_varint(uint32_t field, uint64_t value) {
  put_key(field, kVarint);
  put_varint(value);
}

void ProtoWriter::add_double(uint32_t field, double value) {
  put_key(field, kFixed64);
  put_little_endian(std::bit_cast<uint64_t>(value), 8);
}

void ProtoWriter::add_float(uint32_t field, float value) {
  put_key(field, kFixed32);
  put_little_endian(std::bit_cast<uint32_t>(value), 4);
}

void ProtoWriter::add_bytes(uint32_t field, std::string_view bytes) {
  put_key(field, kLengthDelimited);
  put_varint(bytes.size());
  out_.append(bytes.data(), bytes.size());
}

}  // namespace ftcore::tensorboard

// Protocol-buffer wire encoding, written by hand for the handful of messages
// an event file needs (tensorflow.Event, Summary, TensorProto, ...), so the
// plugin does not depend on protobuf or on generated code.
//
// A message is a sequence of fields, each a key varint (field_number << 3 |
// wire_type) followed by the value: wire type 0 varint (int32, int64, enum,
// bool), 1 little-endian 64-bit (double), 2 length-delimited (string, bytes,
// nested message), 5 little-endian 32-bit (float). Fields may appear in any
// order and proto3 readers accept explicitly written zero values, so writers
// here emit fields in field-number order and only what they are given.
// See https://protobuf.dev/programming-guides/encoding/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ftcore::tensorboard {

class ProtoWriter {
 public:
  // int64/uint64/enum/bool fields. A negative int64 is written as its
  // two's-complement uint64 (ten bytes), as protobuf does.
  void add_varint(uint32_t field, uint64_t value);
  void add_int64(uint32_t field, int64_t value) { add_varint(field, static_cast<uint64_t>(value)); }
  void add_double(uint32_t field, double value);
  void add_float(uint32_t field, float value);
  // string and bytes fields (strings must be UTF-8 for proto3 readers).
  void add_bytes(uint32_t field, std::string_view bytes);
  // A nested message: its encoded bytes, length-delimited.
  void add_message(uint32_t field, const ProtoWriter& message) { add_bytes(field, message.bytes()); }

  const std::string& bytes() const { return out_; }

 private:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };
  void put_key(uint32_t field, WireType type);
  void put_varint(uint64_t value);
  void put_little_endian(uint64_t value, int bytes);

  std::string out_;
};

}  // namespace ftcore::tensorboard

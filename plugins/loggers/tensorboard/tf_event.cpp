// Encodes tensorflow.Event messages (field numbers in tf_event.h).
#include "tf_event.h"

#include "proto_writer.h"

namespace ftcore::tensorboard {
namespace {

namespace event {
constexpr uint32_t kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5, kSessionLog = 7;
}
namespace session_log {
constexpr uint32_t kStatus = 1;
constexpr uint64_t kStart = 1;
}  // namespace session_log
namespace summary {
constexpr uint32_t kValue = 1;
}
namespace value {
constexpr uint32_t kTag = 1, kSimpleValue = 2, kTensor = 8, kMetadata = 9;
}
namespace metadata {
constexpr uint32_t kPluginData = 1, kDataClass = 4;
constexpr uint64_t kDataClassTensor = 2;
}  // namespace metadata
namespace plugin_data {
constexpr uint32_t kPluginName = 1;
}
namespace tensor {
constexpr uint32_t kDtype = 1, kTensorShape = 2, kStringVal = 8;
constexpr uint64_t kDtString = 7;
}  // namespace tensor

ProtoWriter event_header(double wall_time, int64_t step) {
  ProtoWriter e;
  e.add_double(event::kWallTime, wall_time);
  e.add_int64(event::kStep, step);
  return e;
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  ProtoWriter e;
  e.add_double(event::kWallTime, wall_time);
  e.add_bytes(event::kFileVersion, "brain.Event:2");
  return e.bytes();
}

std::string encode_session_start_event(double wall_time, int64_t step) {
  ProtoWriter log;
  log.add_varint(session_log::kStatus, session_log::kStart);
  ProtoWriter e = event_header(wall_time, step);
  e.add_message(event::kSessionLog, log);
  return e.bytes();
}

std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, double>>& tagged_values) {
  ProtoWriter s;
  for (const auto& [tag, number] : tagged_values) {
    ProtoWriter v;
    v.add_bytes(value::kTag, tag);
    // IEEE conversion (GCC on x86-64/aarch64 follows Annex F): round to
    // nearest, overflow to +-inf, NaN stays NaN.
    v.add_float(value::kSimpleValue, static_cast<float>(number));
    s.add_message(summary::kValue, v);
  }
  ProtoWriter e = event_header(wall_time, step);
  e.add_message(event::kSummary, s);
  return e.bytes();
}

std::string encode_text_event(double wall_time, int64_t step, std::string_view tag, std::string_view text) {
  ProtoWriter plugin;
  plugin.add_bytes(plugin_data::kPluginName, "text");  // content: TextPluginData{version 0} encodes as empty
  ProtoWriter meta;
  meta.add_message(metadata::kPluginData, plugin);
  meta.add_varint(metadata::kDataClass, metadata::kDataClassTensor);

  ProtoWriter t;
  t.add_varint(tensor::kDtype, tensor::kDtString);
  t.add_message(tensor::kTensorShape, ProtoWriter{});  // no dims: a scalar
  t.add_bytes(tensor::kStringVal, text);

  ProtoWriter v;
  v.add_bytes(value::kTag, tag);
  v.add_message(value::kTensor, t);
  v.add_message(value::kMetadata, meta);
  ProtoWriter s;
  s.add_message(summary::kValue, v);

  ProtoWriter e = event_header(wall_time, step);
  e.add_message(event::kSummary, s);
  return e.bytes();
}

}  // namespace ftcore::tensorboard

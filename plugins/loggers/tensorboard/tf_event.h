// The tensorflow.Event messages a training run writes, encoded as bytes for
// TfRecordWriter. Field numbers are those of tensorboard/compat/proto:
//   Event          { double wall_time = 1; int64 step = 2; string file_version = 3;
//                    Summary summary = 5; SessionLog session_log = 7; }
//   SessionLog     { SessionStatus status = 1; }            START = 1
//   Summary        { repeated Value value = 1; }
//   Summary.Value  { string tag = 1; float simple_value = 2;
//                    TensorProto tensor = 8; SummaryMetadata metadata = 9; }
//   SummaryMetadata{ PluginData plugin_data = 1; DataClass data_class = 4; }  TENSOR = 2
//   PluginData     { string plugin_name = 1; bytes content = 2; }
//   TensorProto    { DataType dtype = 1; TensorShapeProto tensor_shape = 2;
//                    repeated bytes string_val = 8; }                        DT_STRING = 7
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ftcore::tensorboard {

// The first record of every event file: file_version "brain.Event:2", which
// tells readers to use SessionLog (not step order) to detect restarts.
std::string encode_file_version_event(double wall_time);

// SessionLog START at `step`: TensorBoard drops the events of earlier files
// in the folder whose step is >= `step`, i.e. what a crashed run logged past
// the checkpoint its successor resumed from.
std::string encode_session_start_event(double wall_time, int64_t step);

// One Event holding one simple_value per (tag, value); values are rounded to
// float32, as the field is a float.
std::string encode_scalars_event(double wall_time, int64_t step,
                                 const std::vector<std::pair<std::string, double>>& tagged_values);

// A text summary as tensorboard's text plugin writes it: a rank-0 DT_STRING
// tensor with plugin_data.plugin_name = "text" (rendered as Markdown).
std::string encode_text_event(double wall_time, int64_t step, std::string_view tag, std::string_view text);

}  // namespace ftcore::tensorboard

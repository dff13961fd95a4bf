// Sends a TensorMap (named tensors + metadata) from one rank to all: its
// header (names, dtypes, shapes, metadata) as JSON bytes, then each tensor.
// ZeRO-1 gathers every rank's optimizer state with it for a checkpoint.
#pragma once

#include "ftcore/sdk/tensor_map.h"
#include "process_group.h"

namespace ftcore::dist {

// Collective: every rank calls it; `map` is read on `root` only. Returns
// root's map on every rank (tensors on the group's device).
sdk::TensorMap broadcast_tensor_map(ProcessGroup& group, const sdk::TensorMap& map, int root, const std::string& what);

}  // namespace ftcore::dist

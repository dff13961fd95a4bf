// Saved optimizer state of the adam and lion families in either precision,
// read and written by parameter name, so a run converts 32-bit <-> 8-bit
// state when its recipe switches optimizer within a family:
//   32-bit: "<param>.<slot>"                            fp32, the parameter's shape
//   8-bit:  "<param>.<slot>.q8"     uint8, the parameter's shape (codes)
//           "<param>.<slot>.absmax" fp32 [ceil(numel/256)]
// slot "exp_avg" uses the signed dynamic map, "exp_avg_sq" the unsigned one;
// "<param>.step" (int64 scalar) counts the updates (adam family).
// Used by optimizer/adamw, adamw_8bit, lion, lion_8bit and the paged optimizers
// (library ftcore_state_codec, with blockwise8.h and dynamic_map.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>

#include "ftcore/sdk/slot_optimizer.h"
#include "ftcore/sdk/tensor_map.h"

namespace ftcore::plugins::blockwise8 {

inline std::string q8_key(const std::string& param, const std::string& slot) { return param + "." + slot + ".q8"; }
inline std::string absmax_key(const std::string& param, const std::string& slot) {
  return param + "." + slot + ".absmax";
}
// exp_avg (and any momentum) is signed; exp_avg_sq is not.
inline bool slot_is_signed(const std::string& slot) { return slot != "exp_avg_sq"; }

// True when either form of the slot is present.
bool has_moment(const sdk::TensorMap& state, const std::string& param, const std::string& slot);

// The slot as fp32 on the CPU with `shape`, dequantizing the 8-bit form;
// throws std::runtime_error naming the tensor when absent or of the wrong
// shape, dtype or block count.
at::Tensor read_moment_fp32(const sdk::TensorMap& state, const std::string& param, const std::string& slot,
                            at::IntArrayRef shape);

// The 8-bit form: codes (uint8, `shape`) and absmax (fp32 [blocks]) on the
// CPU, taken as saved when 8-bit, else quantized from the fp32 form
// (bitsandbytes' quantize_blockwise, blocks of 256).
struct Moment8bit {
  at::Tensor codes, absmax;
};
Moment8bit read_moment_8bit(const sdk::TensorMap& state, const std::string& param, const std::string& slot,
                            at::IntArrayRef shape);

// Adds the 8-bit form of an fp32 moment to `state` (quantized, blocks of 256).
void add_moment_as_8bit(sdk::TensorMap& state, const std::string& param, const std::string& slot,
                        const at::Tensor& fp32);

// Slots of a moment for sdk::SlotOptimizer tables (sdk/slot_optimizer.h),
// each read back from either precision. `kept(param)` says which parameters
// keep that form (empty: all); the others get no such slot.
using KeepsForm = std::function<bool(const at::Tensor& param)>;
// bitsandbytes' rule for which form: 8-bit from min_8bit_size elements up, fp32 below.
KeepsForm keeps_8bit(int64_t min_8bit_size);
KeepsForm keeps_fp32(int64_t min_8bit_size);
// "<param>.<slot>": fp32 zeros shaped like the parameter.
sdk::StateSlot fp32_moment_slot(const std::string& slot, KeepsForm kept = {});
// "<param>.<slot>.q8": uint8 zero codes shaped like the parameter.
sdk::StateSlot codes_slot(const std::string& slot, KeepsForm kept);
// "<param>.<slot>.absmax": fp32 zeros, one per 256-element block.
sdk::StateSlot absmax_slot(const std::string& slot, KeepsForm kept);

// Adam's state of one parameter, in fp32, from either precision; nullopt
// when the parameter had not been stepped (no "<param>.step").
struct AdamState {
  int64_t step = 0;
  at::Tensor exp_avg, exp_avg_sq;  // fp32, CPU
};
std::optional<AdamState> read_adam_state(const sdk::TensorMap& state, const std::string& param,
                                         at::IntArrayRef shape);
// Writes it back: 32-bit names (eight_bit false) or 8-bit names.
void write_adam_state(sdk::TensorMap& state, const std::string& param, const AdamState& s, bool eight_bit);

}  // namespace ftcore::plugins::blockwise8

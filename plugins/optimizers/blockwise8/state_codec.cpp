// Reading and writing adam/lion-family state in 32-bit or 8-bit form.
#include "state_codec.h"

#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>

#include "blockwise8.h"

namespace ftcore::plugins::blockwise8 {
namespace {

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

const at::Tensor& require(const sdk::TensorMap& state, const std::string& key, at::ScalarType dtype,
                          at::IntArrayRef shape) {
  const at::Tensor* t = state.find(key);
  if (!t) throw std::runtime_error("optimizer state: missing tensor " + key);
  if (t->scalar_type() != dtype)
    throw std::runtime_error("optimizer state: " + key + " has dtype " + c10::toString(t->scalar_type()) +
                             ", expected " + c10::toString(dtype));
  if (t->sizes() != shape)
    throw std::runtime_error("optimizer state: " + key + " has shape " + shape_str(t->sizes()) + ", expected " +
                             shape_str(shape));
  return *t;
}

}  // namespace

bool has_moment(const sdk::TensorMap& state, const std::string& param, const std::string& slot) {
  return state.find(param + "." + slot) || state.find(q8_key(param, slot));
}

at::Tensor read_moment_fp32(const sdk::TensorMap& state, const std::string& param, const std::string& slot,
                            at::IntArrayRef shape) {
  if (state.find(q8_key(param, slot))) {
    const Moment8bit q = read_moment_8bit(state, param, slot, shape);
    return dequantize_blockwise(q.codes, q.absmax, kStateBlock, quant_map(slot_is_signed(slot)));
  }
  const std::string key = param + "." + slot;
  const at::Tensor* t = state.find(key);
  if (!t) throw std::runtime_error("optimizer state: missing tensor " + key + " (or " + q8_key(param, slot) + ")");
  if (t->sizes() != shape)
    throw std::runtime_error("optimizer state: " + key + " has shape " + shape_str(t->sizes()) + ", expected " +
                             shape_str(shape));
  return t->to(at::kCPU, at::kFloat).contiguous().clone();
}

Moment8bit read_moment_8bit(const sdk::TensorMap& state, const std::string& param, const std::string& slot,
                            at::IntArrayRef shape) {
  if (state.find(q8_key(param, slot))) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const at::Tensor& codes = require(state, q8_key(param, slot), at::kByte, shape);
    const at::Tensor& absmax = require(state, absmax_key(param, slot), at::kFloat, {num_blocks(numel, kStateBlock)});
    return {codes.to(at::kCPU).contiguous().clone(), absmax.to(at::kCPU).contiguous().clone()};
  }
  const at::Tensor fp32 = read_moment_fp32(state, param, slot, shape);
  auto [codes, absmax] = quantize_blockwise(fp32, kStateBlock, quant_map(slot_is_signed(slot)));
  return {codes, absmax};
}

void add_moment_as_8bit(sdk::TensorMap& state, const std::string& param, const std::string& slot,
                        const at::Tensor& fp32) {
  auto [codes, absmax] = quantize_blockwise(fp32, kStateBlock, quant_map(slot_is_signed(slot)));
  state.add(q8_key(param, slot), codes);
  state.add(absmax_key(param, slot), absmax);
}

namespace {

// A slot whose zeros are `zeros(param)` for the parameters that keep its form.
sdk::StateSlot kept_slot(std::string name, KeepsForm kept, std::function<at::Tensor(const at::Tensor&)> zeros) {
  sdk::StateSlot s;
  s.name = std::move(name);
  s.make = [kept, zeros](const at::Tensor& p) { return !kept || kept(p) ? zeros(p) : at::Tensor(); };
  return s;
}

}  // namespace

KeepsForm keeps_8bit(int64_t min_8bit_size) {
  return [min_8bit_size](const at::Tensor& p) { return p.numel() >= min_8bit_size; };
}

KeepsForm keeps_fp32(int64_t min_8bit_size) {
  return [min_8bit_size](const at::Tensor& p) { return p.numel() < min_8bit_size; };
}

sdk::StateSlot fp32_moment_slot(const std::string& slot, KeepsForm kept) {
  sdk::StateSlot s = kept_slot(slot, kept, [](const at::Tensor& p) {
    return at::zeros(p.sizes(), p.options().dtype(at::kFloat));
  });
  s.load = [slot, kept](const sdk::TensorMap& state, const std::string& n, const at::Tensor& p) {
    return !kept || kept(p) ? read_moment_fp32(state, n, slot, p.sizes()).to(p.device()) : at::Tensor();
  };
  return s;
}

// The 8-bit form is read whole (codes and absmax) for each of its two slots:
// from 8-bit state that is a copy, from fp32 state (a conversion) a second
// quantization giving the same result.
sdk::StateSlot codes_slot(const std::string& slot, KeepsForm kept) {
  sdk::StateSlot s = kept_slot(slot + ".q8", kept, [](const at::Tensor& p) {
    return at::zeros(p.sizes(), p.options().dtype(at::kByte));  // bitsandbytes starts from zero codes
  });
  s.load = [slot, kept](const sdk::TensorMap& state, const std::string& n, const at::Tensor& p) {
    return kept(p) ? read_moment_8bit(state, n, slot, p.sizes()).codes.to(p.device()) : at::Tensor();
  };
  return s;
}

sdk::StateSlot absmax_slot(const std::string& slot, KeepsForm kept) {
  sdk::StateSlot s = kept_slot(slot + ".absmax", kept, [](const at::Tensor& p) {
    return at::zeros({num_blocks(p.numel(), kStateBlock)}, p.options().dtype(at::kFloat));  // and zero absmax
  });
  s.load = [slot, kept](const sdk::TensorMap& state, const std::string& n, const at::Tensor& p) {
    return kept(p) ? read_moment_8bit(state, n, slot, p.sizes()).absmax.to(p.device()) : at::Tensor();
  };
  return s;
}

std::optional<AdamState> read_adam_state(const sdk::TensorMap& state, const std::string& param,
                                         at::IntArrayRef shape) {
  const at::Tensor* step = state.find(param + ".step");
  if (!step) return std::nullopt;
  AdamState s;
  s.step = step->item<int64_t>();
  s.exp_avg = read_moment_fp32(state, param, "exp_avg", shape);
  s.exp_avg_sq = read_moment_fp32(state, param, "exp_avg_sq", shape);
  return s;
}

void write_adam_state(sdk::TensorMap& state, const std::string& param, const AdamState& s, bool eight_bit) {
  state.add(param + ".step", at::scalar_tensor(s.step, at::TensorOptions().dtype(at::kLong)));
  if (eight_bit) {
    add_moment_as_8bit(state, param, "exp_avg", s.exp_avg);
    add_moment_as_8bit(state, param, "exp_avg_sq", s.exp_avg_sq);
  } else {
    state.add(param + ".exp_avg", s.exp_avg);
    state.add(param + ".exp_avg_sq", s.exp_avg_sq);
  }
}

}  // namespace ftcore::plugins::blockwise8

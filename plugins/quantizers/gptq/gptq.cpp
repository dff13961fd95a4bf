// GptqQuantizer: calibration bookkeeping, the Quantizer contract, and the
// checkpoint tensors with their validation (see gptq.h).
#include "gptq.h"

#include <stdexcept>

#include <ATen/ATen.h>

#include "ftcore/sdk/option_error.h"
#include "gptq_pack.h"

namespace ftcore::plugins::gptq {
namespace {

std::string shape_str(const at::Tensor& t) {
  std::string s = "[";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

const GptqState& state_of(const sdk::QuantizedWeight& w) {
  auto s = std::dynamic_pointer_cast<const GptqState>(w.state);
  if (w.format != "gptq" || !s) throw std::invalid_argument("gptq: got a quantized weight in format '" + w.format + "'");
  return *s;
}

const at::Tensor& require(const sdk::TensorMap& tensors, const std::string& name) {
  const at::Tensor* t = tensors.find(name);
  if (!t) throw std::invalid_argument("gptq: missing tensor " + name);
  return *t;
}

void require_int32(const at::Tensor& t, const std::string& name, int64_t dim) {
  if (t.scalar_type() != at::kInt)
    throw std::invalid_argument("gptq: " + name + " must be int32, got " + std::string(c10::toString(t.scalar_type())));
  if (t.dim() != dim)
    throw std::invalid_argument("gptq: " + name + " must have " + std::to_string(dim) + " dimensions, got shape " +
                                shape_str(t));
}

std::string meta(const sdk::TensorMap& tensors, const std::string& key, const std::string& fallback) {
  auto it = tensors.metadata.find(key);
  return it == tensors.metadata.end() ? fallback : it->second;
}

}  // namespace

sdk::ParamSpec gptq_param_spec() {
  sdk::ParamSpec s;
  s.add_int("bits", 4).with_range(2, 8).with_doc("Bits per weight: 2, 3, 4 or 8 (3 uses AutoGPTQ's straddling layout).");
  s.add_int("group_size", 128).at_least(-1).with_doc(
      "Input features sharing one scale and zero point per output row (the last group of a row may be shorter); -1: one group per row.");
  s.add_float("damp_percent", 0.01).with_range(0.0, 1.0, true, true).with_doc(
      "Dampening added to diag(H), as a fraction of its mean (AutoGPTQ's 0.01; transformers' GPTQConfig uses 0.1).");
  s.add_bool("desc_act", false).with_doc(
      "Act-order: quantize columns by descending diag(H); g_idx then records each column's group.");
  s.add_bool("sym", true).with_doc("Symmetric codes (zero point (2^bits)/2); false: min-max zero point per group.");
  s.add_int("block_size", 128).at_least(1).with_doc("Columns per lazy batch update (speed only).");
  return s;
}

GptqConfig gptq_config_from(const sdk::Options& options) {
  GptqConfig c;
  const int64_t bits = options.get_int("bits");
  if (!supported_bits(bits))
    throw sdk::OptionError("gptq: bits: got " + std::to_string(bits) + ", supported 2, 3, 4, 8");
  c.bits = static_cast<int>(bits);
  c.group_size = options.get_int("group_size");
  if (c.group_size == 0) throw sdk::OptionError("gptq: group_size: got 0, supported -1 or a positive size");
  c.damp_percent = options.get_float("damp_percent");
  c.desc_act = options.get_bool("desc_act");
  c.sym = options.get_bool("sym");
  c.block_size = options.get_int("block_size");
  return c;
}

void GptqState::to_tensors(const std::string& prefix, sdk::TensorMap& out) const {
  out.add(prefix + ".qzeros", packed.qzeros);
  out.add(prefix + ".scales", packed.scales);
  out.add(prefix + ".g_idx", packed.g_idx);
}

int64_t GptqState::nbytes() const {
  return packed.qzeros.nbytes() + packed.scales.nbytes() + packed.g_idx.nbytes();
}

GptqQuantizer::GptqQuantizer(GptqConfig config) : config_(config) {}

// H <- H * n / (n + m) + (2 / (n + m)) X^T X: the running mean of 2 x x^T.
void GptqQuantizer::add_calibration(const std::string& path, const at::Tensor& inputs) {
  if (inputs.dim() < 1) throw std::invalid_argument("gptq: calibration inputs for " + path + " have no feature dimension");
  at::Tensor x = inputs.reshape({-1, inputs.size(-1)}).to(at::kFloat);
  const int64_t m = x.size(0);
  if (m == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  Hessian& h = hessians_[path];
  if (!h.h.defined()) h.h = at::zeros({x.size(1), x.size(1)}, at::kFloat);
  if (h.h.size(0) != x.size(1))
    throw std::invalid_argument("gptq: calibration inputs for " + path + " have " + std::to_string(x.size(1)) +
                                " features, earlier batches had " + std::to_string(h.h.size(0)));
  const double n = static_cast<double>(h.rows), total = n + static_cast<double>(m);
  h.h.addmm_(x.t(), x, /*beta=*/n / total, /*alpha=*/2.0 / total);
  h.rows += m;
}

sdk::QuantizedWeight GptqQuantizer::quantize(const std::string& path, const at::Tensor& weight) {
  if (weight.dim() != 2) throw std::invalid_argument("gptq: weight of " + path + " must be [out, in], got " + shape_str(weight));
  const int64_t out = weight.size(0), in = weight.size(1);
  Hessian h;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = hessians_.find(path);
    if (it == hessians_.end())
      throw std::runtime_error("gptq: no calibration inputs were given for " + path + " (add_calibration before quantize)");
    h = std::move(it->second);
    hessians_.erase(it);  // H is freed with this call
  }
  if (h.h.size(0) != in)
    throw std::invalid_argument("gptq: weight of " + path + " has " + std::to_string(in) +
                                " input features, its calibration inputs had " + std::to_string(h.h.size(0)));
  if ((in * config_.bits) % 32 != 0 || (out * config_.bits) % 32 != 0)
    throw std::invalid_argument("gptq: " + path + " is " + shape_str(weight) + "; " + std::to_string(config_.bits) +
                                "-bit packing needs in and out to fill whole int32 words");
  GptqResult r = solve_gptq(weight, std::move(h.h), config_, path);

  auto state = std::make_shared<GptqState>();
  state->packed.bits = config_.bits;
  state->packed.in = in;
  state->packed.out = out;
  state->packed.qweight = pack_rows(r.codes.t(), config_.bits);
  state->packed.qzeros = pack_zeros(r.zeros, config_.bits);
  state->packed.scales = r.scales.to(at::kHalf);
  state->packed.g_idx = r.g_idx;
  state->group_size = config_.group_size;
  state->sym = config_.sym;
  state->desc_act = config_.desc_act;
  return {"gptq", state->packed.qweight, state, {out, in}, weight.scalar_type()};
}

at::Tensor GptqQuantizer::dequantize(const sdk::QuantizedWeight& weight, at::ScalarType dtype) const {
  return dequantize_packed(state_of(weight).packed, dtype);
}

at::Tensor GptqQuantizer::matmul(const at::Tensor& x, const sdk::QuantizedWeight& weight) const {
  return matmul_packed(x, state_of(weight).packed);
}

at::Tensor GptqQuantizer::matmul_grad_input(const at::Tensor& grad_out, const sdk::QuantizedWeight& weight) const {
  return matmul_grad_input_packed(grad_out, state_of(weight).packed);
}

sdk::TensorMap GptqQuantizer::to_tensors(const std::string& prefix, const sdk::QuantizedWeight& weight) const {
  const GptqState& s = state_of(weight);
  sdk::TensorMap out;
  out.add(prefix + ".qweight", s.packed.qweight);
  s.to_tensors(prefix, out);
  out.metadata["gptq.bits"] = std::to_string(s.packed.bits);
  out.metadata["gptq.group_size"] = std::to_string(s.group_size);
  out.metadata["gptq.sym"] = s.sym ? "true" : "false";
  out.metadata["gptq.desc_act"] = s.desc_act ? "true" : "false";
  out.metadata["gptq.checkpoint_format"] = "gptq";
  return out;
}

// Everything is inferred from the shapes (in from g_idx, out from scales,
// bits from qweight); the metadata only confirms bits and names group_size,
// sym and desc_act when present.
sdk::QuantizedWeight GptqQuantizer::from_tensors(const std::string& prefix, const sdk::TensorMap& tensors) const {
  const std::string qn = prefix + ".qweight", zn = prefix + ".qzeros", sn = prefix + ".scales", gn = prefix + ".g_idx";
  at::Tensor qweight = require(tensors, qn), qzeros = require(tensors, zn), scales = require(tensors, sn);
  at::Tensor g_idx = require(tensors, gn);
  require_int32(qweight, qn, 2);
  require_int32(qzeros, zn, 2);
  if (g_idx.scalar_type() == at::kLong) g_idx = g_idx.to(at::kInt);
  require_int32(g_idx, gn, 1);
  const auto st = scales.scalar_type();
  if (st != at::kHalf && st != at::kBFloat16 && st != at::kFloat)
    throw std::invalid_argument("gptq: " + sn + " must be float16, bfloat16 or float32, got " + std::string(c10::toString(st)));
  if (scales.dim() != 2) throw std::invalid_argument("gptq: " + sn + " must be [groups, out], got shape " + shape_str(scales));
  const int64_t in = g_idx.size(0), groups = scales.size(0), out = scales.size(1);
  if (in == 0 || out == 0 || groups == 0) throw std::invalid_argument("gptq: " + prefix + " has an empty dimension");
  if (qweight.size(1) != out)
    throw std::invalid_argument("gptq: " + qn + " has shape " + shape_str(qweight) + ", its second dimension must be the " +
                                std::to_string(out) + " outputs of " + sn);
  if ((qweight.size(0) * 32) % in != 0 || !supported_bits(qweight.size(0) * 32 / in))
    throw std::invalid_argument("gptq: " + qn + " has shape " + shape_str(qweight) + ": " + std::to_string(qweight.size(0)) +
                                " words for the " + std::to_string(in) + " inputs of " + gn +
                                " is not 2, 3, 4 or 8 bits per weight");
  const int bits = static_cast<int>(qweight.size(0) * 32 / in);
  const std::string meta_bits = meta(tensors, "gptq.bits", std::to_string(bits));
  if (meta_bits != std::to_string(bits))
    throw std::invalid_argument("gptq: " + qn + " holds " + std::to_string(bits) + "-bit codes, metadata gptq.bits says " + meta_bits);
  if ((out * bits) % 32 != 0 || qzeros.size(0) != groups || qzeros.size(1) != out * bits / 32)
    throw std::invalid_argument("gptq: " + zn + " has shape " + shape_str(qzeros) + ", expected [" + std::to_string(groups) +
                                ", " + std::to_string(out * bits / 32) + "] for " + std::to_string(bits) + "-bit zeros of " +
                                std::to_string(out) + " outputs");
  g_idx = g_idx.contiguous();
  const auto [gmin, gmax] = at::aminmax(g_idx);
  if (gmin.item<int64_t>() < 0 || gmax.item<int64_t>() >= groups)
    throw std::invalid_argument("gptq: " + gn + " has group indices in [" + std::to_string(gmin.item<int64_t>()) + ", " +
                                std::to_string(gmax.item<int64_t>()) + "], " + sn + " has " + std::to_string(groups) + " groups");

  auto state = std::make_shared<GptqState>();
  state->packed = {qweight.contiguous(), qzeros.contiguous(), scales.contiguous(), g_idx, bits, in, out};
  const std::string gs = meta(tensors, "gptq.group_size", "");
  // Without metadata: group 0 always holds group_size columns (act-order or not).
  state->group_size = !gs.empty() ? std::stoll(gs) : groups == 1 ? -1 : g_idx.eq(0).sum().item<int64_t>();
  state->desc_act = meta(tensors, "gptq.desc_act", "") == "true" ||
                    (meta(tensors, "gptq.desc_act", "").empty() && (g_idx.slice(0, 1) < g_idx.slice(0, 0, -1)).any().item<bool>());
  const std::string sym = meta(tensors, "gptq.sym", "");
  state->sym = !sym.empty() ? sym == "true"
                            : unpack_zeros(state->packed.qzeros, bits, out).eq(1 << (bits - 1)).all().item<bool>();
  return {"gptq", state->packed.qweight, state, {out, in}, at::kHalf};
}

}  // namespace ftcore::plugins::gptq

// bitsandbytes' serialized names (Linear4bit's state dict, as transformers
// saves a load_in_4bit model):
//   <prefix>.weight                                       packed codes [(n+1)/2 / itemsize, 1]
//   <prefix>.weight.absmax                                fp32 [blocks] | uint8 [blocks] when nested
//   <prefix>.weight.quant_map                             fp32 [16]
//   <prefix>.weight.nested_absmax                         fp32 [ceil(blocks / 256)]   (nested)
//   <prefix>.weight.nested_quant_map                      fp32 [256]                  (nested)
//   <prefix>.weight.quant_state.bitsandbytes__<nf4|fp4>   uint8 JSON, Python's json.dumps of
//     {"quant_type", "blocksize", "dtype", "shape", ["nested_blocksize", "nested_dtype", "nested_offset"]}
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "bnb4bit.h"

namespace ftcore::plugins::bnb4bit {
namespace {

const char* dtype_json_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    default: throw std::invalid_argument(std::string("bnb4bit: unsupported dtype ") + c10::toString(t));
  }
}

// Python's repr(float): the shortest round-trip digits, positional when the
// decimal exponent is in [-4, 16), else d.ddde[+-]XX.
std::string python_float_repr(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp = std::stoi(sci.substr(epos + 1));
  std::string sign;
  if (mant[0] == '-') { sign = "-"; mant.erase(0, 1); }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp >= -4 && exp < 16) {
    std::string s;
    if (exp < 0) {
      s = "0." + std::string(-exp - 1, '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      s = digits + std::string(exp + 1 - digits.size(), '0') + ".0";
    } else {
      s = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return sign + s;
  }
  std::string s = digits.substr(0, 1);
  if (digits.size() > 1) s += "." + digits.substr(1);
  char e[16];
  std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return sign + s + e;
}

at::Tensor code_tensor(QuantType type) {
  const auto& c = code_values(type);
  return at::from_blob(const_cast<float*>(c.data()), {16}, at::kFloat).clone();
}

[[noreturn]] void malformed(const std::string& name, const std::string& what) {
  throw std::invalid_argument("bnb4bit: " + name + ": " + what);
}

const at::Tensor& require(const sdk::TensorMap& m, const std::string& name) {
  const at::Tensor* t = m.find(name);
  if (!t) malformed(name, "missing");
  return *t;
}

void expect(const at::Tensor& t, const std::string& name, at::ScalarType dtype, int64_t numel) {
  if (t.scalar_type() != dtype)
    malformed(name, std::string("dtype ") + c10::toString(t.scalar_type()) + ", expected " + c10::toString(dtype));
  if (t.dim() != 1 || t.numel() != numel)
    malformed(name, "shape " + c10::str(t.sizes()) + ", expected [" + std::to_string(numel) + "]");
}

at::ScalarType dtype_from_json(const std::string& name, const std::string& s) {
  if (s == "float32") return at::kFloat;
  if (s == "bfloat16") return at::kBFloat16;
  if (s == "float16") return at::kHalf;
  malformed(name, "dtype '" + s + "', supported float32, bfloat16, float16");
}

}  // namespace

std::string Bnb4bitState::state_json() const {
  std::string j = std::string("{\"quant_type\": \"") + quant_type_name(type) + "\", \"blocksize\": " +
                  std::to_string(blocksize) + ", \"dtype\": \"" + dtype_json_name(dtype) + "\", \"shape\": [";
  for (size_t i = 0; i < shape.size(); ++i) j += (i ? ", " : "") + std::to_string(shape[i]);
  j += "]";
  if (nested)
    j += ", \"nested_blocksize\": " + std::to_string(nested_blocksize) +
         ", \"nested_dtype\": \"float32\", \"nested_offset\": " + python_float_repr(offset);
  return j + "}";
}

void Bnb4bitState::to_tensors(const std::string& prefix, sdk::TensorMap& out) const {
  out.add(prefix + ".absmax", absmax);
  out.add(prefix + ".quant_map", code_tensor(type));
  if (nested) {
    out.add(prefix + ".nested_absmax", nested_absmax);
    out.add(prefix + ".nested_quant_map", nested_code.clone());
  }
  const std::string j = state_json();
  at::Tensor bytes = at::empty({static_cast<int64_t>(j.size())}, at::kByte);
  std::memcpy(bytes.data_ptr<uint8_t>(), j.data(), j.size());
  out.add(prefix + ".quant_state.bitsandbytes__" + quant_type_name(type), bytes);
}

sdk::TensorMap Bnb4bitQuantizer::to_tensors(const std::string& prefix, const sdk::QuantizedWeight& weight) const {
  sdk::TensorMap m;
  m.add(prefix + ".weight", weight.packed);
  state_of(weight).to_tensors(prefix + ".weight", m);
  return m;
}

sdk::QuantizedWeight Bnb4bitQuantizer::from_tensors(const std::string& prefix, const sdk::TensorMap& tensors) const {
  const std::string w = prefix + ".weight";
  const std::string type_name = quant_type_name(options_.type);
  const std::string other = options_.type == QuantType::NF4 ? "fp4" : "nf4";
  const std::string qs_name = w + ".quant_state.bitsandbytes__" + type_name;
  if (!tensors.find(qs_name) && tensors.find(w + ".quant_state.bitsandbytes__" + other))
    malformed(w + ".quant_state.bitsandbytes__" + other, "holds " + other + " weights, this quantizer is " + type_name);
  const at::Tensor& qs = require(tensors, qs_name);
  if (qs.scalar_type() != at::kByte || qs.dim() != 1) malformed(qs_name, "expected a 1-D uint8 tensor of JSON");
  const at::Tensor qsc = qs.contiguous().cpu();
  const std::string text(reinterpret_cast<const char*>(qsc.data_ptr<uint8_t>()), qsc.numel());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    malformed(qs_name, std::string("not JSON: ") + e.what());
  }
  auto state = std::make_shared<Bnb4bitState>();
  state->type = options_.type;
  try {
    if (!j.is_object()) malformed(qs_name, "expected a JSON object");
    for (const auto& [k, v] : j.items()) {
      static const char* known[] = {"quant_type", "blocksize", "dtype", "shape", "nested_blocksize", "nested_dtype",
                                    "nested_offset"};
      bool ok = false;
      for (const char* n : known) ok = ok || k == n;
      if (!ok) malformed(qs_name, "unknown key '" + k + "'");
    }
    if (j.at("quant_type").get<std::string>() != type_name)
      malformed(qs_name, "quant_type '" + j.at("quant_type").get<std::string>() + "', expected '" + type_name + "'");
    state->blocksize = j.at("blocksize").get<int64_t>();
    if (!valid_blocksize(state->blocksize))
      malformed(qs_name, "blocksize " + std::to_string(state->blocksize) + ", supported 32..4096 (powers of two)");
    state->dtype = dtype_from_json(qs_name, j.at("dtype").get<std::string>());
    for (const auto& d : j.at("shape")) {
      const int64_t v = d.get<int64_t>();
      if (v < 0) malformed(qs_name, "negative dimension in shape");
      state->shape.push_back(v);
    }
    state->nested = j.contains("nested_offset") || j.contains("nested_blocksize") || j.contains("nested_dtype");
    if (state->nested) {
      state->nested_blocksize = j.at("nested_blocksize").get<int64_t>();
      if (state->nested_blocksize <= 0) malformed(qs_name, "nested_blocksize must be positive");
      if (j.at("nested_dtype").get<std::string>() != "float32")
        malformed(qs_name, "nested_dtype '" + j.at("nested_dtype").get<std::string>() + "', expected 'float32'");
      const double off = j.at("nested_offset").get<double>();
      state->offset = static_cast<float>(off);
      if (!std::isfinite(state->offset) || static_cast<double>(state->offset) != off)
        malformed(qs_name, "nested_offset is not a finite float32 value");
    }
  } catch (const nlohmann::json::exception& e) {
    malformed(qs_name, std::string("bad field: ") + e.what());
  }
  const int64_t n = state->numel();
  const int64_t blocks = state->blocks();

  const at::Tensor& packed = require(tensors, w);
  const int64_t bytes = packed.numel() * packed.element_size();
  if (bytes != (n + 1) / 2) malformed(w, std::to_string(bytes) + " bytes, " + std::to_string(n) + " elements pack to " +
                                             std::to_string((n + 1) / 2));
  if (packed.dim() != 2 || packed.size(1) != 1) malformed(w, "shape " + c10::str(packed.sizes()) + ", expected [k, 1]");
  const at::ScalarType st = packed.scalar_type();
  if (st != at::kByte && st != at::kChar && st != at::kBFloat16 && st != at::kHalf && st != at::kFloat)
    malformed(w, std::string("storage dtype ") + c10::toString(st) + ", supported uint8, int8, bfloat16, float16, float32");

  const at::Tensor& qmap = require(tensors, w + ".quant_map");
  expect(qmap, w + ".quant_map", at::kFloat, 16);
  if (!at::equal(qmap.cpu(), code_tensor(options_.type)))
    malformed(w + ".quant_map", "differs from the " + type_name + " code book");

  const at::Tensor& absmax = require(tensors, w + ".absmax");
  if (state->nested) {
    expect(absmax, w + ".absmax", at::kByte, blocks);
    const int64_t nested_blocks = (blocks + state->nested_blocksize - 1) / state->nested_blocksize;
    const at::Tensor& nabs = require(tensors, w + ".nested_absmax");
    expect(nabs, w + ".nested_absmax", at::kFloat, nested_blocks);
    const at::Tensor& ncode = require(tensors, w + ".nested_quant_map");
    expect(ncode, w + ".nested_quant_map", at::kFloat, 256);
    if (!at::isfinite(ncode).all().item<bool>()) malformed(w + ".nested_quant_map", "holds non-finite values");
    state->nested_absmax = nabs.contiguous();
    state->nested_code = ncode.contiguous();
  } else {
    if (tensors.find(w + ".nested_absmax") || tensors.find(w + ".nested_quant_map"))
      malformed(w + ".nested_absmax", "present but the quant_state has no nested_* fields");
    expect(absmax, w + ".absmax", at::kFloat, blocks);
  }
  state->absmax = absmax.contiguous();

  sdk::QuantizedWeight q;
  q.format = type_name;
  q.packed = packed;
  q.shape = state->shape;
  q.dtype = state->dtype;
  q.state = std::move(state);
  return q;
}

}  // namespace ftcore::plugins::bnb4bit

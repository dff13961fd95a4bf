// quantizer/nf4, quantizer/fp4: options, quantize / dequantize, and the
// state's size. Serialization is in serialization.cpp, the tiled products
// in matmul.cpp, the kernels in quantize.cpp and dequant_kernel_*.cpp.
#include "bnb4bit.h"

#include <stdexcept>

#include <ATen/ATen.h>

#include "ftcore/sdk/option_error.h"

namespace ftcore::plugins::bnb4bit {
namespace {

at::ScalarType dtype_from_option(const std::string& name) {
  if (name == "bf16") return at::kBFloat16;
  if (name == "fp16") return at::kHalf;
  if (name == "fp32") return at::kFloat;
  if (name == "uint8") return at::kByte;
  if (name == "int8") return at::kChar;
  throw sdk::OptionError("bnb4bit: unknown dtype option '" + name + "'");
}

}  // namespace

sdk::ParamSpec bnb4bit_param_spec() {
  sdk::ParamSpec s;
  s.add_int("blocksize", 64)
      .with_range(32, 4096)
      .with_doc("Elements per absmax block of the flattened weight: 32, 64, 128, 256, 512, 1024, 2048 or 4096 "
                "(bitsandbytes' blocksize; QLoRA uses 64).");
  s.add_bool("double_quant", true)
      .with_doc("Quantize the absmax values to 8 bits in blocks of 256 (QLoRA's double quantization, "
                "bitsandbytes' compress_statistics / transformers' bnb_4bit_use_double_quant).");
  s.add_enum("compute_dtype", {"bf16", "fp16", "fp32"}, "bf16")
      .with_doc("dtype of the dequantized tiles and of the GEMMs in matmul (bnb_4bit_compute_dtype).");
  s.add_enum("quant_storage", {"uint8", "int8", "bf16", "fp16", "fp32"}, "uint8")
      .with_doc("dtype the packed codes are stored as (the same bytes reinterpreted; bnb_4bit_quant_storage).");
  return s;
}

Bnb4bitOptions bnb4bit_options_from(QuantType type, const sdk::Options& options) {
  Bnb4bitOptions o;
  o.type = type;
  o.blocksize = options.get_int("blocksize");
  if (!valid_blocksize(o.blocksize))
    throw sdk::OptionError("bnb4bit: blocksize: got " + std::to_string(o.blocksize) +
                           ", supported 32, 64, 128, 256, 512, 1024, 2048, 4096");
  o.double_quant = options.get_bool("double_quant");
  o.compute_dtype = dtype_from_option(options.get_string("compute_dtype"));
  o.quant_storage = dtype_from_option(options.get_string("quant_storage"));
  return o;
}

int64_t Bnb4bitState::nbytes() const {
  int64_t n = absmax.nbytes() + 16 * 4;  // absmax + quant_map
  if (nested) n += nested_absmax.nbytes() + nested_code.nbytes() + 4;  // + offset
  return n;
}

sdk::QuantizedWeight Bnb4bitQuantizer::quantize(const std::string& path, const at::Tensor& weight) {
  const at::ScalarType dt = weight.scalar_type();
  if (dt != at::kFloat && dt != at::kBFloat16 && dt != at::kHalf)
    throw std::invalid_argument("bnb4bit: " + path + " has dtype " + c10::toString(dt) +
                                "; 4-bit quantization takes float32, bfloat16 or float16");
  if (weight.is_cuda())
    throw std::invalid_argument("bnb4bit: quantize " + path + " on the CPU (the CUDA kernels only dequantize)");
  auto state = std::make_shared<Bnb4bitState>();
  state->type = options_.type;
  state->blocksize = options_.blocksize;
  state->dtype = dt;
  state->shape.assign(weight.sizes().begin(), weight.sizes().end());
  at::Tensor packed, absmax;
  quantize_4bit(weight, options_.type, options_.blocksize, packed, absmax);
  if (options_.double_quant && absmax.numel() > 0) {
    state->nested = true;
    quantize_nested(absmax, state->absmax, state->nested_absmax, state->offset);
    const auto& m = dynamic_map_signed();
    state->nested_code = at::from_blob(const_cast<float*>(m.data()), {256}, at::kFloat).clone();
  } else {
    state->absmax = absmax;
  }
  // bitsandbytes' layout: [(n + 1) / 2, 1] bytes, or the same bytes viewed as quant_storage.
  at::Tensor stored = packed;
  if (options_.quant_storage != at::kByte) {
    const int64_t item = c10::elementSize(options_.quant_storage);
    if (packed.numel() % item != 0)
      throw std::invalid_argument("bnb4bit: " + path + " packs to " + std::to_string(packed.numel()) +
                                  " bytes, not a multiple of quant_storage's " + std::to_string(item));
    stored = packed.view(options_.quant_storage);
  }
  sdk::QuantizedWeight q;
  q.format = quant_type_name(options_.type);
  q.packed = stored.unsqueeze(1);
  q.state = std::move(state);
  q.shape.assign(weight.sizes().begin(), weight.sizes().end());
  q.dtype = dt;
  return q;
}

at::Tensor Bnb4bitQuantizer::dequantize(const sdk::QuantizedWeight& weight, at::ScalarType dtype) const {
  return dequantize_all(packed_bytes(weight), state_of(weight), dtype);
}

}  // namespace ftcore::plugins::bnb4bit

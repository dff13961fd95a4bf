// quantizer/nf4 and quantizer/fp4: bitsandbytes' blockwise 4-bit formats
// (QLoRA, arXiv:2305.14314), bit-compatible with
// bitsandbytes.functional.quantize_4bit / dequantize_4bit and with the
// state dicts of bitsandbytes' Linear4bit (transformers' load_in_4bit).
//
// A weight of n elements, flattened, is cut into blocks of `blocksize`
// (the last one partial); each block stores absmax = max|w| in fp32 and each
// element the 4-bit code nearest w / absmax, two codes per byte, the first
// in the high nibble. Double quantization (QLoRA's "compress_statistics")
// stores absmax - mean(absmax) as 8-bit codes of the signed dynamic map in
// blocks of 256, with an fp32 absmax per nested block and the mean as offset.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "codebooks.h"
#include "ftcore/sdk/params.h"
#include "ftcore/sdk/quantizer.h"

namespace ftcore::plugins::bnb4bit {

inline constexpr int64_t kNestedBlocksize = 256;

inline bool valid_blocksize(int64_t b) {
  return b >= 32 && b <= 4096 && (b & (b - 1)) == 0;
}

struct Bnb4bitOptions {
  QuantType type = QuantType::NF4;
  int64_t blocksize = 64;
  bool double_quant = true;
  at::ScalarType compute_dtype = at::kBFloat16;
  at::ScalarType quant_storage = at::kByte;
};

sdk::ParamSpec bnb4bit_param_spec();
Bnb4bitOptions bnb4bit_options_from(QuantType type, const sdk::Options& options);

// One quantized weight's state (bitsandbytes' QuantState).
class Bnb4bitState : public sdk::QuantState {
 public:
  QuantType type = QuantType::NF4;
  int64_t blocksize = 64;
  at::ScalarType dtype = at::kFloat;  // the original weight's
  std::vector<int64_t> shape;
  at::Tensor absmax;  // fp32 [blocks], or uint8 [blocks] codes when nested
  bool nested = false;
  at::Tensor nested_absmax;  // fp32 [ceil(blocks / nested_blocksize)]
  at::Tensor nested_code;    // fp32 [256]
  int64_t nested_blocksize = kNestedBlocksize;
  float offset = 0.0f;

  int64_t numel() const;
  int64_t blocks() const { return (numel() + blocksize - 1) / blocksize; }
  // The per-block absmax in fp32 (expanded from the nested codes when nested), on absmax's device.
  at::Tensor absmax_f32() const;
  // "<prefix>.absmax", ".quant_map", [".nested_absmax", ".nested_quant_map"], ".quant_state.bitsandbytes__<type>".
  void to_tensors(const std::string& prefix, sdk::TensorMap& out) const override;
  int64_t nbytes() const override;
  // The packed JSON bitsandbytes stores under quant_state.bitsandbytes__<type>.
  std::string state_json() const;
};

class Bnb4bitQuantizer : public sdk::Quantizer {
 public:
  explicit Bnb4bitQuantizer(Bnb4bitOptions options) : options_(options) {}
  sdk::QuantizedWeight quantize(const std::string& path, const at::Tensor& weight) override;
  at::Tensor dequantize(const sdk::QuantizedWeight& weight, at::ScalarType dtype) const override;
  at::Tensor matmul(const at::Tensor& x, const sdk::QuantizedWeight& weight) const override;
  at::Tensor matmul_grad_input(const at::Tensor& grad_out, const sdk::QuantizedWeight& weight) const override;
  sdk::TensorMap to_tensors(const std::string& prefix, const sdk::QuantizedWeight& weight) const override;
  sdk::QuantizedWeight from_tensors(const std::string& prefix, const sdk::TensorMap& tensors) const override;

  const Bnb4bitOptions& options() const { return options_; }

 private:
  Bnb4bitOptions options_;
};

// Kernels behind the quantizer (quantize.cpp, dequantize.cpp, matmul.cpp).
// Codes [(n+1)/2] uint8 and absmax fp32 [blocks] of a weight, as quantize_4bit.
void quantize_4bit(const at::Tensor& weight, QuantType type, int64_t blocksize, at::Tensor& packed,
                   at::Tensor& absmax);
// absmax -> (uint8 codes, nested fp32 absmax, offset), as quantize_4bit(compress_statistics=True).
void quantize_nested(const at::Tensor& absmax, at::Tensor& codes, at::Tensor& nested_absmax, float& offset);
// The state's weight as uint8 bytes (quant_storage reinterpreted), contiguous.
at::Tensor packed_bytes(const sdk::QuantizedWeight& weight);
const Bnb4bitState& state_of(const sdk::QuantizedWeight& weight);
// What a dequantization reads, prepared once per call: the packed bytes and
// the block scales as the kernels take them (CPU: the state's own tensors,
// nested codes decoded per block in the kernel; CUDA: absmax expanded to fp32).
struct DequantSource {
  const Bnb4bitState* state = nullptr;
  at::Tensor packed;  // uint8 [(n + 1) / 2]
  at::Tensor absmax;  // fp32 [blocks], or uint8 codes when nested on the CPU
  at::Tensor nested_absmax, nested_code;
};
DequantSource dequant_source(const at::Tensor& packed, const Bnb4bitState& state);
// Elements [begin, end) of the flattened weight, in out's dtype, into out (contiguous, end - begin elements).
void dequantize_range(const DequantSource& src, int64_t begin, int64_t end, at::Tensor out);
// Columns [c0, c0 + width) of every row of the 2-D weight into out [rows, width].
void dequantize_columns(const DequantSource& src, int64_t c0, int64_t width, at::Tensor out);
at::Tensor dequantize_all(const at::Tensor& packed, const Bnb4bitState& state, at::ScalarType dtype);

}  // namespace ftcore::plugins::bnb4bit

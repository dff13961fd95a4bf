// The quantizer contract (NF4, FP4, GPTQ): a frozen weight becomes a
// QuantizedWeight, packed data plus one typed state object (absmax, code,
// blocksize, nested state for double quant, original shape and dtype) that
// serializes to named tensors in bitsandbytes-/GPTQ-compatible names.
// Calibrating quantizers (GPTQ) say so; the core then feeds them per-layer
// activations before asking for the quantized weight.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "ftcore/sdk/tensor_map.h"

namespace ftcore::sdk {

class QuantState {
 public:
  virtual ~QuantState() = default;
  // Appends this state's tensors, named "<prefix>.<tensor>", to `out`.
  virtual void to_tensors(const std::string& prefix, TensorMap& out) const = 0;
  virtual int64_t nbytes() const = 0;
};

struct QuantizedWeight {
  std::string format;                        // "nf4", "fp4", "gptq"
  at::Tensor packed;                         // the codes
  std::shared_ptr<const QuantState> state;
  std::vector<int64_t> shape;                // original [out, in]
  at::ScalarType dtype = at::kFloat;         // original dtype
};

class Quantizer {
 public:
  virtual ~Quantizer() = default;
  virtual bool needs_calibration() const { return false; }
  // Calibrating quantizers: activations [N, in] entering the Linear at `path`.
  virtual void add_calibration(const std::string& path, const at::Tensor& inputs) { (void)path; (void)inputs; }
  virtual QuantizedWeight quantize(const std::string& path, const at::Tensor& weight) = 0;
  virtual at::Tensor dequantize(const QuantizedWeight& weight, at::ScalarType dtype) const = 0;
  // x [..., in] @ dequant(W)^T without keeping a full-precision W: computed
  // in the quantizer's compute dtype, returned in x's dtype.
  virtual at::Tensor matmul(const at::Tensor& x, const QuantizedWeight& weight) const = 0;
  // The activation gradient of that product, grad_out [..., out] @ dequant(W)
  // -> [..., in], again without a persistent full-precision W (W is frozen,
  // so this is the whole backward). Default: dequantize, multiply, discard.
  virtual at::Tensor matmul_grad_input(const at::Tensor& grad_out, const QuantizedWeight& weight) const {
    return grad_out.matmul(dequantize(weight, grad_out.scalar_type()));
  }
  // "<prefix>.weight" plus the state tensors, in the ecosystem's names.
  virtual TensorMap to_tensors(const std::string& prefix, const QuantizedWeight& weight) const = 0;
  virtual QuantizedWeight from_tensors(const std::string& prefix, const TensorMap& tensors) const = 0;
};

}  // namespace ftcore::sdk

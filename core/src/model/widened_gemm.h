// bf16 GEMMs computed by fp32 GEMMs of the widened operands, on CPUs where
// that is faster: Intel with AVX-512 and without AMX-BF16.
//
// Why: there libtorch's bf16 GEMM (oneDNN over AVX512-BF16 dot products) ran
// the default model's shapes at 94-174 GFLOP/s where MKL's fp32 GEMM of the
// same operands widened to fp32 ran at 250-330, casts included, so a bf16
// run's matmuls took 1.8x as long as an fp32 run's (docs/benchmarks.md,
// stop 29). With AMX the bf16 GEMM is several times faster than fp32 and is
// kept; off Intel MKL's fp32 GEMM is slow (packed_gemm.h) and bf16 is kept.
//
// Same numbers: a bf16 GEMM is bf16 operands, products summed in fp32, the
// sum rounded to bf16 once. Widening a bf16 value to fp32 is exact, and the
// product of two bf16 values (8-bit significands) is exact in fp32 (24 bits),
// so only the order of the fp32 additions differs from the bf16 kernel's:
// rounding-level differences (one bf16 step in about 1 of 10^4 outputs on
// the default model's shapes), the same kind AMX and AVX512-BF16 machines
// already differ by. fp16 is left to libtorch (not measured).
//
// FTCORE_WIDEN_BF16_GEMM=0/1 turns it off/on (A/B, tests); read on every call.
#pragma once

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// Whether bf16 GEMMs are widened in this process now.
bool widens_bf16_gemms();

// a.mm(b) (+ bias, added to the fp32 sums before the one rounding, as addmm),
// for 2-D a and b of one dtype: widened when that dtype is bf16 and
// widens_bf16_gemms(), else at::mm / at::addmm as they are. No autograd of its own.
at::Tensor low_precision_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias = at::Tensor());

// low_precision_mm(a, b cast to a's dtype) for an fp32 b, the weight autocast
// casts: contiguous or the transpose of a contiguous tensor (W^T). Where
// widened, b's copy is b rounded to bf16 values in fp32, one pass where the
// cast and the widening took two (and no bf16 tensor is made); elsewhere the
// cast of b's contiguous self (or b as it is where a is fp32).
at::Tensor low_precision_mm_casting_b(const at::Tensor& a, const at::Tensor& b);

// low_precision_mm(a, b).to(at::kFloat): where widened, the fp32 sums are
// rounded to bf16 values in place (the bf16 result widened back, in one pass).
at::Tensor low_precision_mm_to_float(const at::Tensor& a, const at::Tensor& b);

// t.to(bf16).to(fp32) for an fp32 t, in one pass: each value rounded to the
// nearest bf16 (ties to even), kept in fp32 (a NaN stays a NaN).
at::Tensor bf16_rounded(const at::Tensor& t);

// Whether linear_on_frozen_weight applies: bf16 GEMMs are widened, the
// computation is in bf16 (autocast's dtype is bf16, or without autocast x and
// the weight are bf16), the weight is a frozen (no grad) bf16 tensor on the
// CPU, the bias absent or frozen (bf16, or fp32 that autocast casts), and x a
// strided float tensor of 2 or more dimensions. Under no-grad (evaluation,
// generation, inference) every weight counts as frozen: no gradient is taken
// (not in a checkpointed layer's first forward, which takes its recomputation's path).
// Elsewhere at::linear is used as it is.
bool frozen_weight_linear_widens(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// at::linear(x, weight, bias) in bf16 on a frozen bf16 weight (autocast's cast
// of the fp32 weight, or the weight itself), whose forward GEMM and
// input-gradient GEMM are low_precision_mm; x is cast to bf16 first, as
// autocast casts it, and its gradient goes back through that cast.
at::Tensor linear_on_frozen_weight(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace ftcore::model

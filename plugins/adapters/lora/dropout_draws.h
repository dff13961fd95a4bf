// LoRA dropout's draws, made as libtorch's CPU bernoulli_ makes them, in bulk.
//
// at::dropout on the CPU draws noise = bernoulli_(1 - p): libtorch 2.11's
// default kernel runs serially, one element at a time, each element taking
// two 32-bit outputs of the default generator's mt19937 (u = the low 53 bits
// of (first << 32 | second) times 2^-53; the element is kept iff u < 1 - p).
// At about 5 ns an element that was 17% of a bf16 LoRA step on the default
// model (120 draws of [B * T, 576] a step; docs/benchmarks.md), and dropout's
// division, product, mask and max added four more passes.
//
// This makes the same draws from the same generator state, leaves the
// generator exactly where bernoulli_ leaves it, and forms y = x * noise and
// the keep mask in the same pass: the mt19937 state is regenerated and
// tempered in loops the compiler vectorises (one translation unit per ISA,
// dropout_draws_kernel_<isa>.cpp), and u < keep becomes an integer compare
// of the 53 bits with ceil(keep * 2^53). Whether libtorch still draws this
// way is checked once per process against bernoulli_ itself
// (`draws_match_torch`); where it does not, the caller keeps libtorch's path.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace ftcore::plugins::lora {

// True when this libtorch's bernoulli_(keep) on a CPU float tensor draws as
// described above (checked once, on private generators).
bool draws_match_torch();

struct DroppedOut {
  at::Tensor y;     // x * noise
  at::Tensor mask;  // noise != 0, bool, x's shape
};

// The training dropout of a contiguous fp32 CPU tensor x with keep
// probability `keep` = 1 - p, from the default CPU generator; noise =
// bernoulli(keep) / keep as at::dropout forms it, whose nonzero value is
// `kept_value`. Requires draws_match_torch().
DroppedOut dropout_from_torch_draws(const at::Tensor& x, double keep, float kept_value);

// grad * where(mask, kept_value, 0) in one pass (contiguous fp32 grad, bool mask of its shape).
at::Tensor dropout_grad(const at::Tensor& grad, const at::Tensor& mask, float kept_value);

}  // namespace ftcore::plugins::lora

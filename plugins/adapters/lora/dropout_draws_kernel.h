// The element loop of dropout_draws.h, compiled once per ISA
// (dropout_draws_kernel_<isa>.cpp; sdk/cpu_isa.h picks one at run time).
#pragma once

#include <cstdint>

#include <ATen/core/MT19937RNGEngine.h>

namespace ftcore::plugins::lora {

// Draws n elements from `state` (advanced as n bernoulli_ draws advance it):
// keep_i = (53 low bits of the i-th pair of outputs) < threshold;
// mask[i] = keep_i; y[i] = x[i] * (keep_i ? kept_value : 0). Returns whether any was kept.
using DropoutDrawsKernel = bool (*)(at::mt19937_data_pod& state, const float* x, int64_t n, uint64_t threshold,
                                    float kept_value, float* y, bool* mask);

bool dropout_draws_generic(at::mt19937_data_pod&, const float*, int64_t, uint64_t, float, float*, bool*);
bool dropout_draws_avx2(at::mt19937_data_pod&, const float*, int64_t, uint64_t, float, float*, bool*);
bool dropout_draws_avx512(at::mt19937_data_pod&, const float*, int64_t, uint64_t, float, float*, bool*);

}  // namespace ftcore::plugins::lora

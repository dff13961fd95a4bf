// The element loop of dropout_draws.h, compiled once per ISA
// (dropout_draws_kernel_<isa>.cpp; sdk/cpu_isa.h picks one at run time).
#pragma once

#include <cstdint>

#include <ATen/core/MT19937RNGEngine.h>

namespace ftcore::plugins::lora {

// Draws n elements from `state` (advanced as n bernoulli_ draws advance it):
// keep_i = (53 low bits of the i-th pair of outputs) < threshold;
// mask[i] = keep_i; y[i] = x[i] * (keep_i ? kept_value : 0).
using DropoutDrawsKernel = void (*)(at::mt19937_data_pod& state, const float* x, int64_t n, uint64_t threshold,
                                    float kept_value, float* y, bool* mask);

// Dropout's backward: out[i] = grad[i] * (mask[i] ? kept_value : 0), the product autograd forms with the noise.
using DropoutGradKernel = void (*)(const float* grad, const bool* mask, float kept_value, int64_t n, float* out);

void dropout_draws_generic(at::mt19937_data_pod&, const float*, int64_t, uint64_t, float, float*, bool*);
void dropout_draws_avx2(at::mt19937_data_pod&, const float*, int64_t, uint64_t, float, float*, bool*);
void dropout_draws_avx512(at::mt19937_data_pod&, const float*, int64_t, uint64_t, float, float*, bool*);
void dropout_grad_generic(const float*, const bool*, float, int64_t, float*);
void dropout_grad_avx2(const float*, const bool*, float, int64_t, float*);
void dropout_grad_avx512(const float*, const bool*, float, int64_t, float*);

}  // namespace ftcore::plugins::lora

// What the CPU offers, for the choices between kernel paths that depend on it
// (which library GEMM is fast here); one place reads cpuid and libtorch's view.
#pragma once

namespace ftcore::util {

// The vendor string is "GenuineIntel": MKL picks its fast fp32 kernels by
// vendor and takes generic code elsewhere (packed_gemm.h).
bool on_intel_cpu();

// AMX-BF16 tiles, as libtorch detects them: bf16 GEMMs run several times
// faster than fp32 ones where they exist, slower than fp32 ones where not.
bool cpu_has_amx_bf16();

}  // namespace ftcore::util

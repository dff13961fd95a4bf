// Run-time choice of a kernel's instruction set. Kernels are compiled once
// per ISA (separate translation units with -mavx512f / -mavx2 flags) and the
// widest one this CPU supports is called. FTCORE_CPU_ISA=generic|avx2|avx512|avx512vbmi
// caps the choice (for tests and benchmarks of each variant).
#pragma once

#include <cstdlib>
#include <string>

namespace ftcore::sdk {

enum class CpuIsa { Generic = 0, Avx2 = 1, Avx512 = 2 };

inline const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx2: return "avx2";
    default: return "generic";
  }
}

inline CpuIsa detect_cpu_isa() {
  CpuIsa best = CpuIsa::Generic;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) best = CpuIsa::Avx2;
  if (best == CpuIsa::Avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    best = CpuIsa::Avx512;
#endif
  if (const char* cap = std::getenv("FTCORE_CPU_ISA")) {
    std::string c = cap;
    CpuIsa wanted = c == "avx512" || c == "avx512vbmi" ? CpuIsa::Avx512 : c == "avx2" ? CpuIsa::Avx2 : CpuIsa::Generic;
    if (wanted < best) best = wanted;
  }
  return best;
}

// AVX512-VBMI (byte permutes, VPERMB / VPERMT2B) on top of AVX-512: kernels
// that gain from it build a fourth variant. It counts as a refinement of
// avx512, not a level of CpuIsa: FTCORE_CPU_ISA=avx512 turns it off (so the
// plain AVX-512 variant stays testable on every machine), unset or
// avx512vbmi leaves it on where the CPU has it.
inline bool cpu_has_avx512_vbmi() {
  if (detect_cpu_isa() != CpuIsa::Avx512) return false;
#if defined(__x86_64__) || defined(__i386__)
  if (!__builtin_cpu_supports("avx512vbmi")) return false;
#else
  return false;
#endif
  const char* cap = std::getenv("FTCORE_CPU_ISA");
  return cap == nullptr || std::string(cap) == "avx512vbmi";
}

}  // namespace ftcore::sdk

// cpu_features.h: cpuid's vendor string and libtorch's capability table.
#include "cpu_features.h"

#include <cpuid.h>

#include <cstring>

#include <ATen/cpu/Utils.h>

namespace ftcore::util {

namespace {

bool capability(const char* name) {
  const auto caps = at::cpu::get_cpu_capabilities();
  auto it = caps.find(name);
  return it != caps.end() && it->second.isBool() && it->second.toBool();
}

}  // namespace

bool on_intel_cpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, "GenuineIntel") == 0;
}

bool cpu_has_amx_bf16() { return capability("amx_bf16"); }

}  // namespace ftcore::util

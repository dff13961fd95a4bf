// The plugin ABI: every plugin library exports ONE C symbol,
// `ftcore_plugin_info`, a plain-data PluginInfo. The loader reads
// `abi_version` first (a uint32 at offset 0, the same in every ABI version),
// then `struct_size`, then the libtorch version and C++ ABI the plugin was
// built with, and refuses a mismatch before calling anything in the library.
// Only then does it call `register_components`.
//
//   FTCORE_PLUGIN("lion", "1.0.0", "Apache-2.0", register_lion)
//
// declares the symbol for a plugin whose register function adds its
// components to the Registry (see registry.h).
#pragma once

#include <cstdint>

#include <torch/headeronly/version.h>

#include "ftcore/sdk/version.h"

namespace ftcore::sdk {
class Registry;
}

extern "C" {

struct ftcore_plugin_info_t {
  uint32_t abi_version;      // FTCORE_PLUGIN_ABI_VERSION at build time; never moves
  uint32_t struct_size;      // sizeof(ftcore_plugin_info_t) at build time
  const char* name;          // library name, e.g. "adamw"
  const char* version;       // the plugin's own version
  const char* license;       // SPDX identifier
  const char* torch_version; // TORCH_VERSION the plugin was compiled against
  int32_t cxx11_abi;         // _GLIBCXX_USE_CXX11_ABI the plugin was compiled with
  const char* sdk_version;   // FTCORE_SDK_VERSION at build time
  void (*register_components)(ftcore::sdk::Registry& registry);
};

}  // extern "C"

// The build may override these to produce deliberately mismatched test
// fixtures; real plugins never set them.
#ifndef FTCORE_PLUGIN_BUILD_ABI_VERSION
#define FTCORE_PLUGIN_BUILD_ABI_VERSION FTCORE_PLUGIN_ABI_VERSION
#endif
#ifndef FTCORE_PLUGIN_BUILD_TORCH_VERSION
#define FTCORE_PLUGIN_BUILD_TORCH_VERSION TORCH_VERSION
#endif

#define FTCORE_PLUGIN(NAME, VERSION, LICENSE, REGISTER_FN)                              \
  extern "C" __attribute__((visibility("default"))) const ftcore_plugin_info_t           \
      ftcore_plugin_info = {FTCORE_PLUGIN_BUILD_ABI_VERSION,                            \
                            static_cast<uint32_t>(sizeof(ftcore_plugin_info_t)),        \
                            NAME,                                                       \
                            VERSION,                                                    \
                            LICENSE,                                                    \
                            FTCORE_PLUGIN_BUILD_TORCH_VERSION,                          \
                            _GLIBCXX_USE_CXX11_ABI,                                     \
                            FTCORE_SDK_VERSION,                                         \
                            &(REGISTER_FN)};

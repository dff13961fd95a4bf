// Versions shared by the core and every plugin. FTCORE_PLUGIN_ABI_VERSION
// changes whenever ftcore_plugin_info_t, the Registry or a component
// interface changes in a way that breaks already-built plugins (3: Param's
// list lengths and ParamSpec's rules, which cross the ABI in ComponentInfo).
// FTCORE_SDK_VERSION is THE version of ftcore: the top-level CMakeLists.txt
// reads it from this line for the package and `ftcore --version`.
#pragma once

#define FTCORE_PLUGIN_ABI_VERSION 3u
#define FTCORE_SDK_VERSION "0.2.0"

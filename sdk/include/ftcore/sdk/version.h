// Versions shared by the core and every plugin. FTCORE_PLUGIN_ABI_VERSION
// changes whenever ftcore_plugin_info_t, the Registry or a component
// interface changes in a way that breaks already-built plugins.
#pragma once

#define FTCORE_PLUGIN_ABI_VERSION 2u
#define FTCORE_SDK_VERSION "0.2.0"

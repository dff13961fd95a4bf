// Finds and loads plugin libraries (Boost.DLL). Search order (docs/architecture.md, "The plugin ABI"):
// explicit paths (--plugin-path, recipe [plugins] paths), FTCORE_PLUGIN_PATH,
// the plugin folder beside this libftcore (build tree or install prefix:
// <libdir>/ftcore/plugins), then the configured install prefix. Never the
// current directory unless it is named. A library file name found in an
// earlier folder shadows the same name in later ones.
//
// Before anything in a library is called, its ftcore_plugin_info is read:
// abi version first, then struct size, libtorch version and C++ ABI; any
// mismatch refuses the library with a sentence naming both versions and the
// file.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include "ftcore/registry.h"
#include "ftcore/sdk/plugin.h"

namespace ftcore {

class LoadedLibrary {
 public:
  LoadedLibrary(std::filesystem::path path, boost::dll::shared_library library, const ftcore_plugin_info_t* info)
      : path_(std::move(path)), library_(std::move(library)), info_(info) {}
  const std::filesystem::path& path() const { return path_; }
  const ftcore_plugin_info_t& info() const { return *info_; }

 private:
  std::filesystem::path path_;
  boost::dll::shared_library library_;
  const ftcore_plugin_info_t* info_;
};

struct PluginSearchOptions {
  std::vector<std::filesystem::path> explicit_paths;
  bool use_environment = true;    // FTCORE_PLUGIN_PATH
  bool use_default_paths = true;  // beside libftcore, then the install prefix
};

struct PluginRefusal {
  std::filesystem::path path;
  std::string reason;  // a full sentence naming the file
};

struct PluginLoadReport {
  std::vector<std::filesystem::path> searched;
  std::vector<LibraryHandle> loaded;
  std::vector<PluginRefusal> refused;
};

// The folders searched, in order, existing or not, without duplicates.
std::vector<std::filesystem::path> plugin_search_path(const PluginSearchOptions& options);

// Checks a plugin's info block against this build; returns "" when it fits,
// or the refusal sentence. Reads abi_version before any other field.
std::string check_plugin_info(const ftcore_plugin_info_t& info, const std::filesystem::path& file);

// Loads one library and registers its components. Throws PluginRefused with
// the reason when the library does not fit, RegistryError on a duplicate key.
class PluginRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
LibraryHandle load_plugin_library(const std::filesystem::path& file, PluginRegistry& registry);

// Loads every libftcore_*.so on the search path. Refused libraries are
// reported (not fatal); a key claimed twice throws RegistryError.
PluginLoadReport load_plugins(const PluginSearchOptions& options, PluginRegistry& registry);

}  // namespace ftcore

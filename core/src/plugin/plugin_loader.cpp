// Plugin discovery and loading with ABI checks before any plugin code runs.
#include "ftcore/plugin_loader.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include <boost/dll/runtime_symbol_info.hpp>
#include <spdlog/spdlog.h>

#include "ftcore/build_info.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

void append_unique(std::vector<fs::path>& out, std::set<fs::path>& seen, const fs::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::path key = fs::weakly_canonical(dir, ec);
  if (ec) key = fs::absolute(dir);
  if (seen.insert(key).second) out.push_back(key);
}

std::vector<fs::path> split_path_list(const std::string& list) {
  std::vector<fs::path> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ':'))
    if (!item.empty()) out.emplace_back(item);
  return out;
}

bool is_plugin_file_name(const std::string& name) {
  return name.rfind("libftcore_", 0) == 0 && name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0 &&
         name.rfind("libftcore_sdk", 0) != 0;
}

}  // namespace

std::vector<fs::path> plugin_search_path(const PluginSearchOptions& options) {
  std::vector<fs::path> out;
  std::set<fs::path> seen;
  for (const auto& p : options.explicit_paths) append_unique(out, seen, p);
  if (options.use_environment) {
    if (const char* env = std::getenv("FTCORE_PLUGIN_PATH"))
      for (const auto& p : split_path_list(env)) append_unique(out, seen, p);
  }
  if (options.use_default_paths) {
    // libftcore sits in <prefix>/lib (build tree: build/lib); plugins in lib/ftcore/plugins.
    fs::path self = boost::dll::this_line_location().parent_path().string();
    append_unique(out, seen, self / "ftcore" / "plugins");
    append_unique(out, seen, fs::path(build_info::kInstallPluginDir));
  }
  return out;
}

std::string check_plugin_info(const ftcore_plugin_info_t& info, const fs::path& file) {
  // abi_version is the first field of every ABI version's struct: read it alone first.
  uint32_t abi = 0;
  std::memcpy(&abi, &info, sizeof(abi));
  if (abi != FTCORE_PLUGIN_ABI_VERSION) {
    return "refusing plugin " + file.string() + ": it was built for ftcore plugin ABI " + std::to_string(abi) +
           ", this ftcore supports plugin ABI " + std::to_string(FTCORE_PLUGIN_ABI_VERSION);
  }
  if (info.struct_size < sizeof(ftcore_plugin_info_t)) {
    return "refusing plugin " + file.string() + ": its info block is " + std::to_string(info.struct_size) +
           " bytes, this ftcore expects at least " + std::to_string(sizeof(ftcore_plugin_info_t));
  }
  const std::string plugin_torch = info.torch_version ? info.torch_version : "(none)";
  if (plugin_torch != build_info::kTorchVersion) {
    return "refusing plugin " + file.string() + ": it was built against libtorch " + plugin_torch +
           ", this ftcore runs libtorch " + build_info::kTorchVersion;
  }
  if (info.cxx11_abi != build_info::kCxx11Abi) {
    return "refusing plugin " + file.string() + ": it was built with C++ ABI _GLIBCXX_USE_CXX11_ABI=" +
           std::to_string(info.cxx11_abi) + ", this ftcore uses _GLIBCXX_USE_CXX11_ABI=" +
           std::to_string(build_info::kCxx11Abi);
  }
  if (!info.name || !info.version || !info.register_components) {
    return "refusing plugin " + file.string() + ": its info block lacks a name, version or register function";
  }
  return "";
}

LibraryHandle load_plugin_library(const fs::path& file, PluginRegistry& registry) {
  boost::dll::shared_library library;
  try {
    library.load(boost::dll::fs::path(file.string()),
                 boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw PluginRefused("cannot load plugin " + file.string() + ": " + e.what());
  }
  if (!library.has("ftcore_plugin_info")) {
    throw PluginRefused("refusing " + file.string() +
                        ": it exports no ftcore_plugin_info symbol (not built with FTCORE_PLUGIN?)");
  }
  const auto& info = library.get<const ftcore_plugin_info_t>("ftcore_plugin_info");
  if (std::string reason = check_plugin_info(info, file); !reason.empty()) throw PluginRefused(reason);
  auto handle = std::make_shared<const LoadedLibrary>(file, std::move(library), &info);
  registry.register_library(handle, info.register_components);
  spdlog::debug("loaded plugin {} {} from {}", info.name, info.version, file.string());
  return handle;
}

PluginLoadReport load_plugins(const PluginSearchOptions& options, PluginRegistry& registry) {
  PluginLoadReport report;
  report.searched = plugin_search_path(options);
  std::set<std::string> seen_file_names;
  for (const auto& dir : report.searched) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& item : fs::directory_iterator(dir, ec))
      if (item.is_regular_file() && is_plugin_file_name(item.path().filename().string())) files.push_back(item.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      const std::string file_name = file.filename().string();
      if (!seen_file_names.insert(file_name).second) {
        spdlog::debug("{} is shadowed by a library of the same name earlier on the plugin path", file.string());
        continue;
      }
      try {
        report.loaded.push_back(load_plugin_library(file, registry));
      } catch (const PluginRefused& e) {
        spdlog::warn("{}", e.what());
        report.refused.push_back({file, e.what()});
      }
    }
  }
  return report;
}

}  // namespace ftcore

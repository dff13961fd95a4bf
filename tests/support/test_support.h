// Helpers shared by ftcore's GoogleTest binaries: a scratch folder, running a
// Python reference script from the venv, the in-tree plugins, typed options.
#pragma once

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include "../../core/src/util/same_bits.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/registry.h"

namespace ftcore::testing {

// A fresh folder under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("ftcore-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Sets (or with nullopt unsets) a variable for one test, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout (stderr too when merged)
};

// Runs a shell command line; stdout is captured, stderr merged when asked.
inline CommandResult run_command(const std::string& command, bool merge_stderr = false) {
  CommandResult result;
  FILE* pipe = ::popen((command + (merge_stderr ? " 2>&1" : "")).c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs tests/<script> with the venv's Python (where transformers and torch
// live); fails the test with the script's output when it exits non-zero.
inline std::string run_python(const std::string& script, const std::string& args = "") {
  const std::string command = shell_quote(FTCORE_TEST_PYTHON) + " " +
                              shell_quote(std::string(FTCORE_SOURCE_DIR) + "/tests/" + script) + " " + args;
  CommandResult r = run_command(command);
  if (r.exit_code != 0) throw std::runtime_error("python " + script + " failed (" + std::to_string(r.exit_code) + "): " + r.output);
  return r.output;
}

// Same dtype, shape and bytes: what the tests mean by "bit for bit".
using ftcore::same_bits;  // core/src/util/same_bits.h

inline std::string ftcore_binary() { return std::string(FTCORE_BUILD_DIR) + "/bin/ftcore"; }

// Loads the plugins built in this tree only (no FTCORE_PLUGIN_PATH, no install prefix).
inline PluginLoadReport load_in_tree_plugins(PluginRegistry& registry) {
  PluginSearchOptions search;
  search.explicit_paths.push_back(FTCORE_PLUGIN_DIR);
  search.use_environment = false;
  search.use_default_paths = false;
  return load_plugins(search, registry);
}

// The in-tree plugins in one registry, loaded once per process (never
// destroyed, so objects made from it may live until exit).
inline PluginRegistry& in_tree_registry() {
  static PluginRegistry* registry = [] {
    auto* loaded = new PluginRegistry;
    load_in_tree_plugins(*loaded);
    return loaded;
  }();
  return *registry;
}

// `kind/name` from the in-tree registry; throws when it is not registered.
inline const RegistryEntry& in_tree_entry(sdk::ComponentKind kind, const std::string& name) {
  const RegistryEntry* entry = in_tree_registry().find(kind, name);
  if (!entry)
    throw std::runtime_error(std::string(sdk::component_kind_name(kind)) + "/" + name +
                             " is not registered by the in-tree plugins");
  return *entry;
}

// Options for `entry` from user values, as validation would produce them.
inline sdk::Options options_for(const RegistryEntry& entry, std::map<std::string, sdk::ParamValue> values = {}) {
  return sdk::Options(entry.params, std::move(values));
}

}  // namespace ftcore::testing

// The component registry: `kind/name` -> (ParamSpec, factory, library).
// Implements sdk::Registry for plugins' register functions. Every object it
// creates holds a shared reference to the library its code lives in, so a
// plugin library is never unloaded while an object from it is alive, even
// after the registry itself is gone.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ftcore/sdk/registry.h"
#include "ftcore/sdk/scheduler.h"

extern "C" struct ftcore_plugin_info_t;

namespace ftcore {

class LoadedLibrary;  // plugin_loader.h
using LibraryHandle = std::shared_ptr<const LoadedLibrary>;

struct RegistryEntry {
  // Declared first so it is destroyed last: the factory's code lives in it.
  LibraryHandle library;  // null for components compiled into the core
  sdk::ComponentKind kind{};
  std::string name;
  std::string summary;
  std::shared_ptr<const sdk::ParamSpec> params;
  std::variant<sdk::OptimizerFactory, sdk::SchedulerFactory, sdk::AdapterFactory, sdk::QuantizerFactory,
               sdk::SamplerFactory, sdk::LoggerFactory>
      factory;

  std::string key() const;                    // "optimizer/adamw"
  std::filesystem::path library_path() const; // empty for built-ins
  std::string library_version() const;
};

class RegistryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class PluginRegistry : public sdk::Registry {
 public:
  PluginRegistry() = default;
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  void add_optimizer(sdk::ComponentInfo info, sdk::OptimizerFactory factory) override;
  void add_scheduler(sdk::ComponentInfo info, sdk::SchedulerFactory factory) override;
  void add_adapter(sdk::ComponentInfo info, sdk::AdapterFactory factory) override;
  void add_quantizer(sdk::ComponentInfo info, sdk::QuantizerFactory factory) override;
  void add_sampler(sdk::ComponentInfo info, sdk::SamplerFactory factory) override;
  void add_logger(sdk::ComponentInfo info, sdk::LoggerFactory factory) override;

  // Runs a plugin's register function with every entry it adds stamped with
  // `library`. All-or-nothing: on a duplicate key (RegistryError naming both
  // files) nothing from this library is kept.
  void register_library(const LibraryHandle& library, void (*register_fn)(sdk::Registry&));

  const RegistryEntry* find(sdk::ComponentKind kind, const std::string& name) const;
  std::vector<const RegistryEntry*> entries() const;
  std::vector<const RegistryEntry*> entries(sdk::ComponentKind kind) const;
  std::vector<std::string> names(sdk::ComponentKind kind) const;

  // Creation; `entry` must come from this registry. Options were validated
  // against entry.params (see recipe/validate). Exceptions from a factory are
  // rethrown as std::runtime_error prefixed with the component key.
  std::shared_ptr<sdk::Optimizer> create_optimizer(const RegistryEntry& entry,
                                                   std::vector<sdk::ParamGroupSpec> groups,
                                                   const sdk::Options& options) const;
  std::shared_ptr<sdk::Scheduler> create_scheduler(const RegistryEntry& entry, const sdk::Options& options,
                                                   const sdk::SchedulerContext& context) const;
  std::shared_ptr<sdk::Adapter> create_adapter(const RegistryEntry& entry, const sdk::Options& options) const;
  std::shared_ptr<sdk::Quantizer> create_quantizer(const RegistryEntry& entry, const sdk::Options& options) const;
  std::shared_ptr<sdk::Sampler> create_sampler(const RegistryEntry& entry, const sdk::Options& options) const;
  std::shared_ptr<sdk::Logger> create_logger(const RegistryEntry& entry, const sdk::Options& options) const;

 private:
  template <typename Factory>
  void add(sdk::ComponentKind kind, sdk::ComponentInfo info, Factory factory);

  std::map<std::string, RegistryEntry> entries_;
  LibraryHandle current_library_;
  std::vector<std::string> pending_keys_;
};

}  // namespace ftcore

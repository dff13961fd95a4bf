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
  // One alternative per kind, in the kinds' order (sdk/component_kinds.h);
  // std::monostate only closes the list, no entry holds it.
#define FTCORE_KIND_FACTORY_ALTERNATIVE(Type, ...) sdk::Type##Factory,
  std::variant<FTCORE_COMPONENT_KINDS(FTCORE_KIND_FACTORY_ALTERNATIVE) std::monostate> factory;
#undef FTCORE_KIND_FACTORY_ALTERNATIVE

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

  // add_optimizer(info, factory), add_scheduler, ... (one per kind).
#define FTCORE_KIND_ADD(Type, name, ...) void add_##name(sdk::ComponentInfo info, sdk::Type##Factory factory) override;
  FTCORE_COMPONENT_KINDS(FTCORE_KIND_ADD)
#undef FTCORE_KIND_ADD

  // Runs a plugin's register function with every entry it adds stamped with
  // `library`. All-or-nothing: on a duplicate key (RegistryError naming both
  // files) nothing from this library is kept.
  void register_library(const LibraryHandle& library, void (*register_fn)(sdk::Registry&));

  const RegistryEntry* find(sdk::ComponentKind kind, const std::string& name) const;
  std::vector<const RegistryEntry*> entries() const;
  std::vector<const RegistryEntry*> entries(sdk::ComponentKind kind) const;
  std::vector<std::string> names(sdk::ComponentKind kind) const;

  // Creation; `entry` must come from this registry. Options were validated
  // against entry.params (see recipe/validate). One per kind, taking what the
  // kind's factory takes:
  //   create_optimizer(entry, std::vector<sdk::ParamGroupSpec> groups, options)
  //   create_scheduler(entry, options, const sdk::SchedulerContext& context)
  //   create_adapter / create_quantizer / create_sampler / create_logger(entry, options)
  // An exception from a factory is rethrown prefixed with the component key
  // ("optimizer/adamw: ..."): an sdk::OptionError as an sdk::OptionError (the
  // user's options cannot be honoured together), anything else as a
  // std::runtime_error.
#define FTCORE_KIND_CREATE(Type, name, rank, default_name, repeatable, params, args) \
  std::shared_ptr<sdk::Type> create_##name(const RegistryEntry& entry, FTCORE_UNPARENTHESIZE params) const;
  FTCORE_COMPONENT_KINDS(FTCORE_KIND_CREATE)
#undef FTCORE_KIND_CREATE

 private:
  template <typename Factory>
  void add(sdk::ComponentKind kind, sdk::ComponentInfo info, Factory factory);

  std::map<std::string, RegistryEntry> entries_;
  LibraryHandle current_library_;
  std::vector<std::string> pending_keys_;
};

}  // namespace ftcore

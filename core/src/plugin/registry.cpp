// PluginRegistry: entries by kind/name, creation with library lifetime.
#include "ftcore/registry.h"

#include <exception>
#include <mutex>

#include "ftcore/plugin_loader.h"
#include "ftcore/sdk/adapter.h"
#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/option_error.h"
#include "ftcore/sdk/quantizer.h"
#include "ftcore/sdk/sampler.h"
#include "ftcore/sdk/scheduler.h"

namespace ftcore {

std::string RegistryEntry::key() const { return std::string(sdk::component_kind_name(kind)) + "/" + name; }

std::filesystem::path RegistryEntry::library_path() const { return library ? library->path() : std::filesystem::path(); }

std::string RegistryEntry::library_version() const { return library ? library->info().version : "builtin"; }

namespace {

std::string describe_origin(const LibraryHandle& library) {
  return library ? library->path().string() : std::string("(built into ftcore)");
}

// Libraries whose last object died while an exception was in flight: the
// exception may point into the library (c10::Error keeps the file name of
// its TORCH_CHECK as a pointer into the plugin's data), so the library stays
// mapped until the process exits.
void keep_until_exit(const LibraryHandle& library) {
  static std::mutex mutex;
  static auto* kept = new std::vector<LibraryHandle>();  // never destroyed: exit unmaps everything
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(library);
}

// Wraps a freshly created object so its deleter keeps the plugin library
// loaded until the object's destructor (plugin code) has run.
template <typename T>
std::shared_ptr<T> hold_library(std::unique_ptr<T> object, const RegistryEntry& entry) {
  if (!object) throw std::runtime_error(entry.key() + ": the plugin's factory returned nothing");
  LibraryHandle library = entry.library;
  return std::shared_ptr<T>(object.release(), [library](T* p) {
    delete p;
    if (library && std::uncaught_exceptions() > 0) keep_until_exit(library);
  });
}

template <typename Factory>
const Factory& factory_of(const RegistryEntry& entry, sdk::ComponentKind kind) {
  if (entry.kind != kind)
    throw std::logic_error(entry.key() + " is not a " + sdk::component_kind_name(kind));
  return std::get<Factory>(entry.factory);
}

// Prefixes a factory's error with the component key. An OptionError keeps
// its type, so the CLI can tell "these option values cannot be honoured
// together" (a config error) from a factory that failed (a runtime error).
// The new exception copies the message: nothing of it points into the plugin.
template <typename F>
auto call_factory(const RegistryEntry& entry, F&& call) {
  try {
    return call();
  } catch (const sdk::OptionError& e) {
    throw sdk::OptionError(entry.key() + ": " + e.what());
  } catch (const std::exception& e) {
    throw std::runtime_error(entry.key() + ": " + e.what());
  }
}

}  // namespace

template <typename Factory>
void PluginRegistry::add(sdk::ComponentKind kind, sdk::ComponentInfo info, Factory factory) {
  RegistryEntry entry;
  entry.library = current_library_;
  entry.kind = kind;
  entry.name = std::move(info.name);
  entry.summary = std::move(info.summary);
  entry.params = std::make_shared<const sdk::ParamSpec>(std::move(info.params));
  entry.factory = std::move(factory);
  const std::string key = entry.key();
  auto existing = entries_.find(key);
  if (existing != entries_.end()) {
    throw RegistryError(key + " is claimed by both " + describe_origin(existing->second.library) + " and " +
                        describe_origin(entry.library));
  }
  bool valid_name = !entry.name.empty();
  for (char c : entry.name) valid_name &= (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  if (!valid_name)
    throw RegistryError(describe_origin(entry.library) + " registers an invalid component name '" + entry.name +
                        "' (use [a-z0-9_]+)");
  pending_keys_.push_back(key);
  entries_.emplace(key, std::move(entry));
}

#define FTCORE_KIND_ADD(Type, name, ...)                                                 \
  void PluginRegistry::add_##name(sdk::ComponentInfo info, sdk::Type##Factory factory) { \
    add(sdk::ComponentKind::Type, std::move(info), std::move(factory));                  \
  }
FTCORE_COMPONENT_KINDS(FTCORE_KIND_ADD)
#undef FTCORE_KIND_ADD

void PluginRegistry::register_library(const LibraryHandle& library, void (*register_fn)(sdk::Registry&)) {
  current_library_ = library;
  pending_keys_.clear();
  try {
    register_fn(*this);
  } catch (...) {
    for (const auto& key : pending_keys_) entries_.erase(key);
    current_library_.reset();
    pending_keys_.clear();
    throw;
  }
  current_library_.reset();
  pending_keys_.clear();
}

const RegistryEntry* PluginRegistry::find(sdk::ComponentKind kind, const std::string& name) const {
  auto it = entries_.find(std::string(sdk::component_kind_name(kind)) + "/" + name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<const RegistryEntry*> PluginRegistry::entries() const {
  std::vector<const RegistryEntry*> out;
  for (const auto& [key, entry] : entries_) out.push_back(&entry);
  return out;
}

std::vector<const RegistryEntry*> PluginRegistry::entries(sdk::ComponentKind kind) const {
  std::vector<const RegistryEntry*> out;
  for (const auto& [key, entry] : entries_)
    if (entry.kind == kind) out.push_back(&entry);
  return out;
}

std::vector<std::string> PluginRegistry::names(sdk::ComponentKind kind) const {
  std::vector<std::string> out;
  for (const auto* e : entries(kind)) out.push_back(e->name);
  return out;
}

#define FTCORE_KIND_CREATE(Type, name, rank, default_name, repeatable, params, args)                   \
  std::shared_ptr<sdk::Type> PluginRegistry::create_##name(const RegistryEntry& entry,                    \
                                                           FTCORE_UNPARENTHESIZE params) const {         \
    const auto& factory = factory_of<sdk::Type##Factory>(entry, sdk::ComponentKind::Type);               \
    return call_factory(entry, [&] { return hold_library(factory args, entry); });                       \
  }
FTCORE_COMPONENT_KINDS(FTCORE_KIND_CREATE)
#undef FTCORE_KIND_CREATE

}  // namespace ftcore

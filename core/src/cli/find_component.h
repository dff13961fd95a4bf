// A component by the name a user types: "kind/name", or a bare name that
// only one kind uses (`plugins describe`, `plugin verify`).
#pragma once

#include <string>

#include "ftcore/registry.h"

namespace ftcore::cli {

// nullptr with `error` saying why ("no plugin component named 'x'; did you
// mean ...?", or which kinds share the name).
const RegistryEntry* find_component(const PluginRegistry& registry, const std::string& name, std::string* error);

}  // namespace ftcore::cli

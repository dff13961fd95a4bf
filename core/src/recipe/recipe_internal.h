// Shared between the recipe sources only (not part of the public API).
#pragma once

#include <vector>

#include <toml++/toml.h>

namespace ftcore {

// The string nodes of [plugins].paths (an array, or one string), in order;
// recipe_plugin_paths() resolves exactly these.
std::vector<const toml::node*> plugin_path_nodes(const toml::table& table);

}  // namespace ftcore

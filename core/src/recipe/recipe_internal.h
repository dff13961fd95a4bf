// Shared between the recipe sources only (not part of the public API).
#pragma once

#include <vector>

#include <toml++/toml.h>

#include "ftcore/diagnostics.h"

namespace ftcore {

// The string nodes of [plugins].paths (an array, or one string), in order;
// recipe_plugin_paths() resolves exactly these.
std::vector<const toml::node*> plugin_path_nodes(const toml::table& table);

// Makes the relative model, tokenizer and data paths written in a recipe file
// relative to that file's folder (recipe_inputs.cpp says why).
void resolve_input_paths(toml::table& root);

// Reports input paths that are missing or of the wrong kind, and a
// sequence_len the model cannot hold.
void check_recipe_inputs(const toml::table& root, std::vector<Diagnostic>& diagnostics);

}  // namespace ftcore

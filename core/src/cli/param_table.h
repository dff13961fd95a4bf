// Renders ParamSpecs for humans: `ftcore plugins describe`, the JSON listing
// and docs/recipes.md (generated, checked to be current by a test).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ftcore/registry.h"

namespace ftcore::cli {

std::string describe_text(const std::string& heading, const std::string& summary, const sdk::ParamSpec& spec);
nlohmann::json spec_json(const sdk::ParamSpec& spec);
std::string recipes_markdown(const PluginRegistry& registry);

}  // namespace ftcore::cli

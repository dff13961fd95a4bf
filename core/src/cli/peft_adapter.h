// Applying a saved PEFT adapter folder (adapter_config.json +
// adapter_model.safetensors) to a model outside a recipe, e.g.
// `ftcore generate --adapter runs/quickstart`: the config's peft_type picks
// the adapter plugin and its fields become the plugin's options.
#pragma once

#include <filesystem>
#include <memory>

#include "ftcore/model.h"
#include "ftcore/registry.h"
#include "ftcore/sdk/adapter.h"

namespace ftcore::cli {

// Throws std::runtime_error naming the file and field that is wrong.
std::shared_ptr<sdk::Adapter> apply_peft_adapter(const std::filesystem::path& dir, Model& model,
                                                 const PluginRegistry& registry);

}  // namespace ftcore::cli

// The tokenized-data cache: one safetensors file per cache key, holding the
// train and validation examples as concatenated ids/labels with offsets.
#pragma once

#include <filesystem>

#include "ftcore/dataset.h"

namespace ftcore::data {

void save_cache(const std::filesystem::path& file, const PreparedData& data);
void load_cache(const std::filesystem::path& file, PreparedData& data);

}  // namespace ftcore::data

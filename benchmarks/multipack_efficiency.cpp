// Multipack packing efficiency on a recipe's real dataset (issue #3 target:
// >= 95% on the quiz dataset at sequence_len 512): the recipe's data prepared
// with its tokenizer, then sampler/multipack's rows for epoch 0, measured by
// sdk/packing_efficiency.h. Also the padding a non-packing batch of the same
// size would need, for comparison.
//   multipack_efficiency RECIPE [SEQUENCE_LEN]
#include <iostream>

#include "ftcore/dataset.h"
#include "ftcore/plugin_loader.h"
#include "ftcore/recipe.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/packing_efficiency.h"
#include "ftcore/sdk/sampler.h"

using namespace ftcore;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: multipack_efficiency RECIPE [SEQUENCE_LEN]\n";
    return 2;
  }
  init_runtime();
  const int64_t sequence_len = argc > 2 ? std::stoll(argv[2]) : 512;
  PluginRegistry registry;
  load_plugins(PluginSearchOptions{}, registry);
  toml::table table = load_recipe_table(argv[1], {"data.sequence_len=" + std::to_string(sequence_len)});
  Recipe recipe = validate_recipe(table, argv[1], registry);
  const std::filesystem::path folder = recipe.model.get_string("path");
  auto tokenizer = Tokenizer::from_folder(folder);
  PreparedData data = prepare_data(DataConfig::from_options(recipe.data, recipe.model, recipe.train), *tokenizer,
                                   folder / "tokenizer.json");
  sdk::SamplerInput input;
  for (const auto& e : data.train) input.lengths.push_back(static_cast<int64_t>(e.input_ids.size()));
  input.batch_size = 1;
  input.sequence_len = sequence_len;
  input.seed = 42;
  const RegistryEntry* entry = registry.find(sdk::ComponentKind::Sampler, "multipack");
  auto sampler = registry.create_sampler(*entry, sdk::Options(entry->params, {}));
  auto batches = sampler->batches(input, 0);
  int64_t tokens = 0, longest = 0;
  for (int64_t n : input.lengths) tokens += n, longest = std::max(longest, n);
  std::cout << argv[1] << ": " << input.lengths.size() << " examples, " << tokens << " tokens, sequence_len "
            << sequence_len << "\n"
            << "multipack: " << batches.size() << " rows, efficiency "
            << sdk::packing_efficiency(batches, input.lengths, sequence_len) << " (target >= 0.95)\n"
            << "one example per row, padded to the longest (" << longest << "): efficiency "
            << static_cast<double>(tokens) / (static_cast<double>(input.lengths.size()) * longest) << "\n";
  return 0;
}

// Registers optimizer/paged_adamw_32bit and optimizer/paged_adamw_8bit: one library, two optimizers.
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "paged_adamw.h"
#include "paged_adamw_8bit.h"

namespace {

void register_paged_adamw(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  using namespace ftcore::plugins;
  registry.add_optimizer(
      {"paged_adamw_32bit",
       "AdamW with its state paged between memory and a file (CPU) or CUDA managed memory, within max_resident_bytes",
       paged_adamw::paged_adamw_32bit_param_spec()},
      [](std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options) -> std::unique_ptr<sdk::Optimizer> {
        return std::make_unique<paged_adamw::PagedAdamW>(groups, adamw::adamw_options_from(options),
                                                         paged_adamw::paging_options_from(options));
      });
  registry.add_optimizer(
      {"paged_adamw_8bit",
       "AdamW with blockwise 8-bit state (adamw_8bit) paged between memory and a file (CPU) or CUDA managed memory",
       paged_adamw::paged_adamw_8bit_param_spec()},
      [](std::vector<sdk::ParamGroupSpec> groups, const sdk::Options& options) -> std::unique_ptr<sdk::Optimizer> {
        return std::make_unique<paged_adamw::PagedAdamW8bit>(groups, adamw_8bit::adamw_8bit_options_from(options),
                                                             paged_adamw::paging_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("paged_adamw", "1.0.0", "Apache-2.0", register_paged_adamw)

// Registers optimizer/paged_adamw_32bit and optimizer/paged_adamw_8bit: one library, two optimizers.
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"
#include "paged_adamw.h"
#include "paged_adamw_8bit.h"

namespace ftcore::plugins::paged_adamw {

static void register_paged_adamw(sdk::Registry& registry) {
  registry.add_optimizer(
      {"paged_adamw_32bit",
       "AdamW with its state paged between memory and a file (CPU) or CUDA managed memory, within max_resident_bytes",
       paged_adamw_32bit_param_spec()},
      sdk::optimizer_factory<PagedAdamW>(adamw::adamw_options_from, paging_options_from));
  registry.add_optimizer(
      {"paged_adamw_8bit",
       "AdamW with blockwise 8-bit state (adamw_8bit) paged between memory and a file (CPU) or CUDA managed memory",
       paged_adamw_8bit_param_spec()},
      sdk::optimizer_factory<PagedAdamW8bit>(adamw_8bit::adamw_8bit_options_from, paging_options_from));
}

}  // namespace ftcore::plugins::paged_adamw

FTCORE_PLUGIN("paged_adamw", "1.0.0", "Apache-2.0", ftcore::plugins::paged_adamw::register_paged_adamw)

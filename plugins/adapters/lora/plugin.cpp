// Registers adapter/lora, adapter/relora and adapter/lora_plus.
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"
#include "lora_adapter.h"
#include "lora_plus_adapter.h"
#include "relora_adapter.h"

namespace ftcore::plugins::lora {

static void register_lora(sdk::Registry& registry) {
  registry.add_adapter(
      {"lora", "LoRA / rsLoRA / DoRA low-rank adapters on Linear slots, saved and loaded in HF PEFT's format",
       lora_param_spec()},
      sdk::options_factory<sdk::Adapter, LoraAdapter>(lora_options_from));
  registry.add_adapter(
      {"relora", "ReLoRA: LoRA merged into the base and restarted every relora_steps steps, with a jagged lr "
                 "re-warmup and pruned optimizer state",
       relora_param_spec()},
      sdk::options_factory<sdk::Adapter, ReloraAdapter>(lora_options_from, relora_options_from));
  registry.add_adapter(
      {"lora_plus", "LoRA+: adapter/lora with the B matrices trained at loraplus_lr_ratio x the A matrices' lr "
                    "(PEFT's create_loraplus_optimizer groups)",
       lora_plus_param_spec()},
      sdk::options_factory<sdk::Adapter, LoraPlusAdapter>(lora_options_from, lora_plus_options_from));
}

}  // namespace ftcore::plugins::lora

FTCORE_PLUGIN("lora", "1.0.0", "Apache-2.0", ftcore::plugins::lora::register_lora)

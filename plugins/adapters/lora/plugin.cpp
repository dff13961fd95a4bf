// Registers adapter/lora, adapter/relora and adapter/lora_plus.
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "lora_adapter.h"
#include "lora_plus_adapter.h"
#include "relora_adapter.h"

namespace {

void register_lora(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_adapter(
      {"lora", "LoRA / rsLoRA / DoRA low-rank adapters on Linear slots, saved and loaded in HF PEFT's format",
       plugins::lora::lora_param_spec()},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Adapter> {
        return std::make_unique<plugins::lora::LoraAdapter>(plugins::lora::lora_options_from(options));
      });
  registry.add_adapter(
      {"relora", "ReLoRA: LoRA merged into the base and restarted every relora_steps steps, with a jagged lr "
                 "re-warmup and pruned optimizer state",
       plugins::lora::relora_param_spec()},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Adapter> {
        return std::make_unique<plugins::lora::ReloraAdapter>(plugins::lora::lora_options_from(options),
                                                              plugins::lora::relora_options_from(options));
      });
  registry.add_adapter(
      {"lora_plus", "LoRA+: adapter/lora with the B matrices trained at loraplus_lr_ratio x the A matrices' lr "
                    "(PEFT's create_loraplus_optimizer groups)",
       plugins::lora::lora_plus_param_spec()},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Adapter> {
        return std::make_unique<plugins::lora::LoraPlusAdapter>(plugins::lora::lora_options_from(options),
                                                                plugins::lora::lora_plus_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("lora", "1.0.0", "Apache-2.0", register_lora)

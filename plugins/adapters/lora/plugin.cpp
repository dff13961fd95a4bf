// Registers adapter/lora.
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "lora_adapter.h"

namespace {

void register_lora(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_adapter(
      {"lora", "LoRA / rsLoRA low-rank adapters on Linear slots, saved and loaded in HF PEFT's format",
       plugins::lora::lora_param_spec()},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Adapter> {
        return std::make_unique<plugins::lora::LoraAdapter>(plugins::lora::lora_options_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("lora", "1.0.0", "Apache-2.0", register_lora)

// Registers quantizer/gptq.
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"
#include "gptq.h"

namespace {

void register_gptq(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  registry.add_quantizer(
      {"gptq", "GPTQ post-training quantization (2/3/4/8-bit, groups, act-order), AutoGPTQ v1 checkpoint layout",
       plugins::gptq::gptq_param_spec()},
      [](const sdk::Options& options) -> std::unique_ptr<sdk::Quantizer> {
        return std::make_unique<plugins::gptq::GptqQuantizer>(plugins::gptq::gptq_config_from(options));
      });
}

}  // namespace

FTCORE_PLUGIN("gptq", "1.0.0", "Apache-2.0", register_gptq)

// Registers quantizer/gptq.
#include "ftcore/sdk/factories.h"
#include "ftcore/sdk/plugin.h"
#include "gptq.h"

namespace ftcore::plugins::gptq {

static void register_gptq(sdk::Registry& registry) {
  registry.add_quantizer(
      {"gptq", "GPTQ post-training quantization (2/3/4/8-bit, groups, act-order), AutoGPTQ v1 checkpoint layout",
       gptq_param_spec()},
      sdk::options_factory<sdk::Quantizer, GptqQuantizer>(gptq_config_from));
}

}  // namespace ftcore::plugins::gptq

FTCORE_PLUGIN("gptq", "1.0.0", "Apache-2.0", ftcore::plugins::gptq::register_gptq)

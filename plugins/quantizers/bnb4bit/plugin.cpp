// Registers quantizer/nf4 and quantizer/fp4 (bitsandbytes' 4-bit formats).
#include "bnb4bit.h"
#include "ftcore/sdk/plugin.h"
#include "ftcore/sdk/registry.h"

namespace {

void register_bnb4bit(ftcore::sdk::Registry& registry) {
  using namespace ftcore;
  using plugins::bnb4bit::QuantType;
  for (QuantType type : {QuantType::NF4, QuantType::FP4}) {
    const std::string name = plugins::bnb4bit::quant_type_name(type);
    registry.add_quantizer(
        {name,
         type == QuantType::NF4 ? "NF4 (QLoRA NormalFloat4), blockwise absmax, bitsandbytes-compatible"
                                : "FP4 (e2m1), blockwise absmax, bitsandbytes-compatible",
         plugins::bnb4bit::bnb4bit_param_spec()},
        [type](const sdk::Options& options) -> std::unique_ptr<sdk::Quantizer> {
          return std::make_unique<plugins::bnb4bit::Bnb4bitQuantizer>(
              plugins::bnb4bit::bnb4bit_options_from(type, options));
        });
  }
}

}  // namespace

FTCORE_PLUGIN("bnb4bit", "1.0.0", "Apache-2.0", register_bnb4bit)

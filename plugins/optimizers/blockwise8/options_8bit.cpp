// The 8-bit optimizers' shared recipe keys, and optimizer/adamw_8bit's options.
#include "options_8bit.h"

#include "family_params.h"
#include "ftcore/sdk/option_error.h"
#include "ftcore/sdk/option_fields.h"

namespace ftcore::plugins::blockwise8 {

void add_8bit_state_params(sdk::ParamSpec& s) {
  s.add_int("min_8bit_size", 4096).at_least(0).with_doc(
      "Tensors with fewer elements keep fp32 state (bitsandbytes' min_8bit_size).");
  s.add_int("percentile_clipping", 100).with_range(1, 100).with_doc(
      "Scale each gradient down to this percentile of its last 100 norms; 100 = off (bitsandbytes' rule).");
  s.add_bool("block_wise", true).with_doc("Blockwise quantization (256 elements per absmax); must be true.");
}

State8bitOptions state_8bit_options_from(const sdk::Options& options, const std::string& owner) {
  if (!options.get_bool("block_wise"))
    throw sdk::OptionError(owner +
                           ": option block_wise = false is not supported (only blockwise quantization is implemented)");
  using O = State8bitOptions;
  return sdk::read_fields<O>(options,
                             {{"min_8bit_size", &O::min_8bit_size}, {"percentile_clipping", &O::percentile_clipping}});
}

}  // namespace ftcore::plugins::blockwise8

namespace ftcore::plugins::adamw_8bit {

sdk::ParamSpec adamw_8bit_param_spec() {
  sdk::ParamSpec s;
  blockwise8::add_adam_family_params(s);  // lr, betas, eps
  s.add_float("weight_decay", 0.01)
      .at_least(0.0)
      .with_doc(
          "Decoupled weight decay, p *= 1 - lr * weight_decay (groups may override); 0.01 as torch's AdamW and "
          "bitsandbytes'.");
  blockwise8::add_8bit_state_params(s);
  return s;
}

AdamW8bitOptions adamw_8bit_options_from(const sdk::Options& options) {
  using O = AdamW8bitOptions;
  return sdk::read_fields<O>(
      options, {{"lr", &O::lr}, {"betas", &O::betas}, {"eps", &O::eps}, {"weight_decay", &O::weight_decay}},
      O(blockwise8::state_8bit_options_from(options, "adamw_8bit")));
}

}  // namespace ftcore::plugins::adamw_8bit

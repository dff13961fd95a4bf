// The 8-bit optimizers' shared recipe keys, and optimizer/adamw_8bit's options.
#include "options_8bit.h"

#include "ftcore/sdk/option_error.h"

namespace ftcore::plugins::blockwise8 {

void add_8bit_state_params(sdk::ParamSpec& s) { blockwise8::add_8bit_state_params(s); }

void require_block_wise(const sdk::Options& options, const std::string& owner) {
  if (!options.get_bool("block_wise"))
    throw sdk::OptionError(owner +
                           ": option block_wise = false is not supported (only blockwise quantization is implemented)");
}

}  // namespace ftcore::plugins::blockwise8

namespace ftcore::plugins::adamw_8bit {

sdk::ParamSpec adamw_8bit_param_spec() {
  sdk::ParamSpec s;
  s.add_float("lr", 1e-3).above(0.0).with_doc("Base learning rate (scaled per group by lr_scale and the scheduler).");
  s.add_pair("betas", sdk::FloatPair{0.9, 0.999})
      .with_range(0.0, 1.0, false, true)
      .with_doc("Decay rates of the first and second moment estimates.");
  s.add_float("eps", 1e-8).above(0.0).with_doc("Added to the denominator for numerical stability.");
  s.add_float("weight_decay", 0.01)
      .at_least(0.0)
      .with_doc(
          "Decoupled weight decay, p *= 1 - lr * weight_decay (groups may override); 0.01 as torch's AdamW and "
          "bitsandbytes'.");
  blockwise8::add_8bit_state_params(s);
  return s;
}

AdamW8bitOptions adamw_8bit_options_from(const sdk::Options& options) {
  blockwise8::require_block_wise(options, "adamw_8bit");
  AdamW8bitOptions o;
  o.lr = options.get_float("lr");
  o.betas = options.get_pair("betas");
  o.eps = options.get_float("eps");
  o.weight_decay = options.get_float("weight_decay");
  o.min_8bit_size = options.get_int("min_8bit_size");
  o.percentile_clipping = options.get_int("percentile_clipping");
  return o;
}

}  // namespace ftcore::plugins::adamw_8bit

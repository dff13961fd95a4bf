// The recipe keys of the 8-bit optimizers: those every one has
// (min_8bit_size, percentile_clipping, block_wise), and optimizer/adamw_8bit's
// options (bitsandbytes' AdamW8bit), shared with optimizer/paged_adamw_8bit.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/options_with_lr.h"
#include "ftcore/sdk/params.h"

namespace ftcore::plugins::blockwise8 {

// The options every 8-bit optimizer has, a base of its typed options.
struct State8bitOptions {
  int64_t min_8bit_size = 4096;       // smaller tensors keep fp32 state
  int64_t percentile_clipping = 100;  // 100: off
};

// Adds min_8bit_size, percentile_clipping and block_wise to an optimizer's spec.
void add_8bit_state_params(sdk::ParamSpec& spec);
// Reads them; throws sdk::OptionError, naming `owner`, for block_wise = false.
State8bitOptions state_8bit_options_from(const sdk::Options& options, const std::string& owner);

}  // namespace ftcore::plugins::blockwise8

namespace ftcore::plugins::adamw_8bit {

struct AdamW8bitOptions : public sdk::OptionsWithLr<AdamW8bitOptions>, public blockwise8::State8bitOptions {
  explicit AdamW8bitOptions(blockwise8::State8bitOptions state = {}) : OptionsWithLr(1e-3), State8bitOptions(state) {}
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.01;
};

sdk::ParamSpec adamw_8bit_param_spec();
// Throws sdk::OptionError for block_wise = false.
AdamW8bitOptions adamw_8bit_options_from(const sdk::Options& options);

}  // namespace ftcore::plugins::adamw_8bit

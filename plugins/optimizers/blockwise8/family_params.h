// The recipe keys that the 32-bit and the 8-bit optimizer of a state family
// share, each with one default, range and doc, so `ftcore plugins describe`
// says the same of adamw and adamw_8bit, or of lion and lion_8bit:
//   adam (adamw, adamw_8bit, the paged ones): lr 1e-3, betas (0.9, 0.999), eps 1e-8
//   lion (lion, lion_8bit):                   lr 1e-4, betas (0.9, 0.99), weight_decay 0
// Each optimizer adds its own keys after these (library ftcore_state_codec).
#pragma once

#include "ftcore/sdk/params.h"

namespace ftcore::plugins::blockwise8 {

void add_adam_family_params(sdk::ParamSpec& spec);
void add_lion_family_params(sdk::ParamSpec& spec);

}  // namespace ftcore::plugins::blockwise8

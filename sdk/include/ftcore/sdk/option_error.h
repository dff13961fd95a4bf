// The error a component's factory throws when the user's option values, each
// valid on its own, cannot be honoured together ("block_wise = false is not
// supported", "decouple requires betas[0] < betas[1]"). The registry passes it
// through with its type, so `ftcore run` reports it as a config error (exit 2)
// while any other failure of a factory stays a runtime error (exit 1).
#pragma once

#include <stdexcept>

namespace ftcore::sdk {

class OptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace ftcore::sdk

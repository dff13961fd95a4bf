// Factories for Registry::add_* made from a component's constructor and the
// functions that read its typed options, so a register function is one call
// per component:
//
//   registry.add_optimizer({"adamw", "AdamW ...", adamw_param_spec()},
//                          sdk::optimizer_factory<AdamW>(adamw_options_from));
//
// optimizer_factory<T>(from...) builds T(groups, from(options)...);
// options_factory<Base, T>(from...) builds T(from(options)...) for the kinds
// made from options alone (adapter, quantizer, sampler, logger). Whatever
// the `from` functions throw (sdk::OptionError for impossible combinations)
// reaches the registry unchanged.
#pragma once

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "ftcore/sdk/optimizer.h"
#include "ftcore/sdk/registry.h"

namespace ftcore::sdk {

template <typename T, typename... From>
OptimizerFactory optimizer_factory(From... from) {
  return [from...](std::vector<ParamGroupSpec> groups, const Options& options) -> std::unique_ptr<Optimizer> {
    return std::make_unique<T>(groups, from(options)...);
  };
}

template <typename Base, typename T, typename... From>
std::function<std::unique_ptr<Base>(const Options&)> options_factory(From... from) {
  return [from...](const Options& options) -> std::unique_ptr<Base> { return std::make_unique<T>(from(options)...); };
}

}  // namespace ftcore::sdk

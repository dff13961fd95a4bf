// What a plugin's register function sees: it adds components, each under a
// `kind/name` key with a ParamSpec and a factory. The core implements this
// interface; it stamps every entry with the library it came from so that
// the library stays loaded while anything it created is alive.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ftcore/sdk/component_kinds.h"
#include "ftcore/sdk/params.h"

namespace ftcore::sdk {

// The kinds' classes (class Optimizer; ...) and what their factories receive.
#define FTCORE_KIND_CLASS(Type, ...) class Type;
FTCORE_COMPONENT_KINDS(FTCORE_KIND_CLASS)
#undef FTCORE_KIND_CLASS
struct ParamGroupSpec;
struct SchedulerContext;

// Optimizer, Scheduler, Adapter, Quantizer, Sampler, Logger (sdk/component_kinds.h).
#define FTCORE_KIND_ENUMERATOR(Type, ...) Type,
enum class ComponentKind { FTCORE_COMPONENT_KINDS(FTCORE_KIND_ENUMERATOR) };
#undef FTCORE_KIND_ENUMERATOR

// "optimizer", "scheduler", ... as used in registry keys and recipe sections.
const char* component_kind_name(ComponentKind kind);
bool parse_component_kind(const std::string& text, ComponentKind* kind);
const std::vector<ComponentKind>& all_component_kinds();

// Factories receive validated options; they may throw std::exception with a
// message for the user (the core reports it with the component's key). An
// sdk::OptionError (option_error.h) keeps its type: the user's option values
// cannot be honoured together. OptimizerFactory, SchedulerFactory, ...:
#define FTCORE_KIND_FACTORY(Type, name, rank, default_name, repeatable, params, args) \
  using Type##Factory = std::function<std::unique_ptr<Type> params>;
FTCORE_COMPONENT_KINDS(FTCORE_KIND_FACTORY)
#undef FTCORE_KIND_FACTORY

struct ComponentInfo {
  std::string name;     // unique within its kind, [a-z0-9_]+
  std::string summary;  // one line for `ftcore plugins`
  ParamSpec params;
};

class Registry {
 public:
  virtual ~Registry() = default;
  // add_optimizer, add_scheduler, ..., in the kinds' order (the vtable is ABI).
#define FTCORE_KIND_ADD(Type, name, ...) virtual void add_##name(ComponentInfo info, Type##Factory factory) = 0;
  FTCORE_COMPONENT_KINDS(FTCORE_KIND_ADD)
#undef FTCORE_KIND_ADD
};

}  // namespace ftcore::sdk

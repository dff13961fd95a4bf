// What a plugin's register function sees: it adds components, each under a
// `kind/name` key with a ParamSpec and a factory. The core implements this
// interface; it stamps every entry with the library it came from so that
// the library stays loaded while anything it created is alive.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ftcore/sdk/params.h"

namespace ftcore::sdk {

class Optimizer;
class Scheduler;
class Adapter;
class Quantizer;
class Sampler;
class Logger;
struct ParamGroupSpec;
struct SchedulerContext;

enum class ComponentKind { Optimizer, Scheduler, Adapter, Quantizer, Sampler, Logger };

// "optimizer", "scheduler", ... as used in registry keys and recipe sections.
const char* component_kind_name(ComponentKind kind);
bool parse_component_kind(const std::string& text, ComponentKind* kind);
const std::vector<ComponentKind>& all_component_kinds();

// Factories receive validated options; they may throw std::exception with a
// message for the user (the core reports it with the component's key).
using OptimizerFactory =
    std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroupSpec> groups, const Options& options)>;
using SchedulerFactory =
    std::function<std::unique_ptr<Scheduler>(const Options& options, const SchedulerContext& context)>;
using AdapterFactory = std::function<std::unique_ptr<Adapter>(const Options& options)>;
using QuantizerFactory = std::function<std::unique_ptr<Quantizer>(const Options& options)>;
using SamplerFactory = std::function<std::unique_ptr<Sampler>(const Options& options)>;
using LoggerFactory = std::function<std::unique_ptr<Logger>(const Options& options)>;

struct ComponentInfo {
  std::string name;     // unique within its kind, [a-z0-9_]+
  std::string summary;  // one line for `ftcore plugins`
  ParamSpec params;
};

class Registry {
 public:
  virtual ~Registry() = default;
  virtual void add_optimizer(ComponentInfo info, OptimizerFactory factory) = 0;
  virtual void add_scheduler(ComponentInfo info, SchedulerFactory factory) = 0;
  virtual void add_adapter(ComponentInfo info, AdapterFactory factory) = 0;
  virtual void add_quantizer(ComponentInfo info, QuantizerFactory factory) = 0;
  virtual void add_sampler(ComponentInfo info, SamplerFactory factory) = 0;
  virtual void add_logger(ComponentInfo info, LoggerFactory factory) = 0;
};

}  // namespace ftcore::sdk

// Names of the six component kinds, as used in registry keys and recipes.
#include "ftcore/sdk/registry.h"

namespace ftcore::sdk {

const char* component_kind_name(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::Optimizer: return "optimizer";
    case ComponentKind::Scheduler: return "scheduler";
    case ComponentKind::Adapter: return "adapter";
    case ComponentKind::Quantizer: return "quantizer";
    case ComponentKind::Sampler: return "sampler";
    case ComponentKind::Logger: return "logger";
  }
  return "?";
}

const std::vector<ComponentKind>& all_component_kinds() {
  static const std::vector<ComponentKind> kinds = {
      ComponentKind::Optimizer, ComponentKind::Scheduler, ComponentKind::Adapter,
      ComponentKind::Quantizer, ComponentKind::Sampler,   ComponentKind::Logger};
  return kinds;
}

bool parse_component_kind(const std::string& text, ComponentKind* kind) {
  for (ComponentKind k : all_component_kinds()) {
    if (text == component_kind_name(k)) {
      *kind = k;
      return true;
    }
  }
  return false;
}

}  // namespace ftcore::sdk

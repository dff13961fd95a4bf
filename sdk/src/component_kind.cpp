// Names of the component kinds (sdk/component_kinds.h), as used in registry
// keys and recipes.
#include "ftcore/sdk/registry.h"

namespace ftcore::sdk {

const char* component_kind_name(ComponentKind kind) {
  switch (kind) {
#define FTCORE_KIND_NAME_CASE(Type, name, ...) \
  case ComponentKind::Type: return #name;
    FTCORE_COMPONENT_KINDS(FTCORE_KIND_NAME_CASE)
#undef FTCORE_KIND_NAME_CASE
  }
  return "?";
}

const std::vector<ComponentKind>& all_component_kinds() {
#define FTCORE_KIND_VALUE(Type, ...) ComponentKind::Type,
  static const std::vector<ComponentKind> kinds = {FTCORE_COMPONENT_KINDS(FTCORE_KIND_VALUE)};
#undef FTCORE_KIND_VALUE
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

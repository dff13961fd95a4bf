// environment_switch.h.
#include "environment_switch.h"

#include <cstdlib>
#include <string>

#include "ftcore/diagnostics.h"

namespace ftcore::cli {

bool environment_switch(const char* name, bool unset) {
  const char* v = std::getenv(name);
  const std::string value = v ? v : "";
  if (value.empty()) return unset;
  if (value == "0" || value == "1") return value == "1";
  throw ConfigError({{{std::string("environment ") + name, 0, 0}, "'" + value + "' is not 0 or 1"}});
}

}  // namespace ftcore::cli

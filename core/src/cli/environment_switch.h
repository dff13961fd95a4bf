// A 0/1 switch read from the environment (FTCORE_HUGE_PAGES, FTCORE_HEAP_REUSE).
#pragma once

namespace ftcore::cli {

// The switch `name`'s value: `unset` when absent or empty, false for "0",
// true for "1"; anything else is a ConfigError naming the variable.
bool environment_switch(const char* name, bool unset);

}  // namespace ftcore::cli

// Typed options from validated recipe values, by a table of (key, field):
//
//   AdamWOptions o = sdk::read_fields<AdamWOptions>(options, {
//       {"lr", &AdamWOptions::lr}, {"betas", &AdamWOptions::betas}, {"amsgrad", &AdamWOptions::amsgrad}});
//
// Each field is read with the Options getter of its type (get_float,
// get_int, get_bool, get_pair, get_string, get_string_list, get_int_list);
// an std::optional<double> field is set only when its key has a value.
// Options that need more than a copy (an enum, a check across keys) are
// read by hand after the table.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ftcore/sdk/params.h"

namespace ftcore::sdk {

template <typename O>
struct OptionField {
  const char* key;
  std::variant<double O::*, int64_t O::*, bool O::*, FloatPair O::*, std::string O::*, std::vector<std::string> O::*,
               std::vector<int64_t> O::*, std::optional<double> O::*>
      field;
};

namespace detail {
inline void read_option(const Options& o, const char* key, double& v) { v = o.get_float(key); }
inline void read_option(const Options& o, const char* key, int64_t& v) { v = o.get_int(key); }
inline void read_option(const Options& o, const char* key, bool& v) { v = o.get_bool(key); }
inline void read_option(const Options& o, const char* key, FloatPair& v) { v = o.get_pair(key); }
inline void read_option(const Options& o, const char* key, std::string& v) { v = o.get_string(key); }
inline void read_option(const Options& o, const char* key, std::vector<std::string>& v) { v = o.get_string_list(key); }
inline void read_option(const Options& o, const char* key, std::vector<int64_t>& v) { v = o.get_int_list(key); }
inline void read_option(const Options& o, const char* key, std::optional<double>& v) {
  if (o.has_value(key)) v = o.get_float(key);
}
}  // namespace detail

// Reads every field of the table into `out` (default: O{}) and returns it.
template <typename O>
O read_fields(const Options& options, std::initializer_list<OptionField<O>> fields, O out = O{}) {
  for (const OptionField<O>& f : fields)
    std::visit([&](auto member) { detail::read_option(options, f.key, out.*member); }, f.field);
  return out;
}

}  // namespace ftcore::sdk

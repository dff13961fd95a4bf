// One TOML table against one ParamSpec: types, ranges, choices, list
// lengths, required keys, unknown keys ("did you mean"), mutually exclusive
// keys, then the spec's rules across keys.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <tuple>
#include <type_traits>

#include "ftcore/recipe.h"

namespace ftcore {

SourcePos source_of(const toml::node& node) {
  const auto& src = node.source();
  return SourcePos{src.path ? *src.path : std::string("<recipe>"), static_cast<int>(src.begin.line),
                   static_cast<int>(src.begin.column)};
}

SourcePos source_of(const toml::key& key, const toml::node& value) {
  const auto& src = key.source();
  if (src.path && src.begin.line > 0)
    return SourcePos{*src.path, static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)};
  return source_of(value);
}

namespace {

const char* toml_type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

// A float the way a person would write it: the fewest %g digits that read
// back exactly (0.999, not 0.99899999999999999), recognisable as a float.
std::string shown_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  std::string s(buffer);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// A scalar as the user wrote it (an integer stays an integer), for messages.
std::string shown_value(const toml::node& n) {
  if (auto i = n.value_exact<int64_t>()) return std::to_string(*i);
  if (auto d = n.value_exact<double>()) return shown_float(*d);
  if (auto b = n.value_exact<bool>()) return *b ? "true" : "false";
  if (auto s = n.value_exact<std::string>()) return sdk::format_param_value(*s);
  return "";
}

// "a string" plus the value when it is a scalar: `got the string "3e-4"`.
std::string described(const toml::node& n) {
  std::string value = shown_value(n);
  if (value.empty()) return toml_type_name(n);
  std::string type = toml_type_name(n);
  return "the " + type.substr(type.find(' ') + 1) + " " + value;
}

struct Checker {
  const std::string& label;  // "[optimizer] (adamw)"
  std::vector<Diagnostic>& diagnostics;

  void error(const toml::node& at, const std::string& message) { diagnostics.push_back({source_of(at), message}); }

  std::optional<double> number(const toml::node& n) {
    if (auto i = n.value_exact<int64_t>()) return static_cast<double>(*i);
    if (auto d = n.value_exact<double>()) return *d;
    return std::nullopt;
  }

  // `name` is the key, or "key[i]" for an element of a list or pair.
  // TOML has inf and nan; no option of ours means either (`lr = inf` would
  // pass `> 0` and turn every weight into NaN at the first step).
  bool in_range(const sdk::Param& p, const std::string& name, const toml::node& at, double v) {
    if (!std::isfinite(v)) {
      error(at, name + " = " + shown_value(at) + " in " + label + " must be a finite number");
      return false;
    }
    if (!p.range || p.range->contains(v)) return true;
    error(at, name + " = " + shown_value(at) + " in " + label + " is out of range: must be " + p.range->describe());
    return false;
  }

  static std::string expected(const sdk::Param& p) {
    switch (p.type) {
      case sdk::ParamType::Bool: return "a boolean (true or false)";
      case sdk::ParamType::Int: return "an integer";
      case sdk::ParamType::Float: return "a number";
      case sdk::ParamType::String: return "a string";
      case sdk::ParamType::Enum: return "one of \"" + join(p.choices, "\", \"") + "\"";
      case sdk::ParamType::StringList: return "a string or an array of strings";
      case sdk::ParamType::IntList: return "an array of integers";
      case sdk::ParamType::FloatList: return "an array of numbers";
      case sdk::ParamType::Pair: return "an array of two numbers";
    }
    return "?";
  }

  // What one element of a list or pair must be.
  static std::string expected_element(const sdk::Param& p) {
    switch (p.type) {
      case sdk::ParamType::StringList: return "a string";
      case sdk::ParamType::IntList: return "an integer";
      default: return "a number";
    }
  }

  // The elements of an array, each converted by `element` (nullopt: the
  // element has the wrong type). Range problems are reported by in_range.
  template <typename T, typename Convert>
  std::optional<std::vector<T>> array_of(const sdk::Param& p, const toml::array& arr, Convert element) {
    std::vector<T> out;
    bool ok = true;
    for (size_t i = 0; i < arr.size(); ++i) {
      const toml::node& item = *arr.get(i);
      const std::string name = p.key + "[" + std::to_string(i) + "]";
      std::optional<T> v = element(item);
      if (!v) {
        error(item, name + " in " + label + " must be " + expected_element(p) + ", got " + described(item));
        ok = false;
      } else if constexpr (std::is_arithmetic_v<T>) {
        if (!in_range(p, name, item, static_cast<double>(*v))) ok = false;
        out.push_back(*v);
      } else {
        out.push_back(*v);
      }
    }
    return ok ? std::optional(out) : std::nullopt;
  }

  // A list's length against the spec's with_length().
  template <typename T>
  std::optional<sdk::ParamValue> sized(const sdk::Param& p, const toml::node& n, std::optional<std::vector<T>> v) {
    if (!v) return std::nullopt;
    if (v->size() < p.min_items || v->size() > p.max_items) {
      error(n, p.key + " in " + label + " must hold " + p.describe_length() + ", got " + std::to_string(v->size()));
      return std::nullopt;
    }
    return sdk::ParamValue(std::move(*v));
  }

  std::optional<sdk::ParamValue> convert(const sdk::Param& p, const toml::node& n) {
    switch (p.type) {
      case sdk::ParamType::Bool:
        if (auto b = n.value_exact<bool>()) return sdk::ParamValue(*b);
        break;
      case sdk::ParamType::Int:
        if (auto i = n.value_exact<int64_t>()) {
          if (!in_range(p, p.key, n, static_cast<double>(*i))) return std::nullopt;
          return sdk::ParamValue(*i);
        }
        break;
      case sdk::ParamType::Float:
        if (auto d = number(n)) {
          if (!in_range(p, p.key, n, *d)) return std::nullopt;
          return sdk::ParamValue(*d);
        }
        break;
      case sdk::ParamType::String:
        if (auto s = n.value_exact<std::string>()) return sdk::ParamValue(*s);
        break;
      case sdk::ParamType::Enum:
        if (auto s = n.value_exact<std::string>()) {
          for (const auto& c : p.choices)
            if (c == *s) return sdk::ParamValue(*s);
          std::string hint = closest_match(*s, p.choices);
          error(n, p.key + " = " + shown_value(n) + " in " + label + " is not one of \"" +
                       join(p.choices, "\", \"") + "\"" + (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"));
          return std::nullopt;
        }
        break;
      case sdk::ParamType::StringList: {
        if (auto s = n.value_exact<std::string>()) return sized(p, n, std::optional(std::vector<std::string>{*s}));
        const toml::array* arr = n.as_array();
        if (!arr) break;
        return sized(p, n, array_of<std::string>(p, *arr, [](const toml::node& i) { return i.value_exact<std::string>(); }));
      }
      case sdk::ParamType::IntList: {
        const toml::array* arr = n.as_array();
        if (!arr) break;
        return sized(p, n, array_of<int64_t>(p, *arr, [](const toml::node& i) { return i.value_exact<int64_t>(); }));
      }
      case sdk::ParamType::FloatList: {
        const toml::array* arr = n.as_array();
        if (!arr) break;
        return sized(p, n, array_of<double>(p, *arr, [&](const toml::node& i) { return number(i); }));
      }
      case sdk::ParamType::Pair: {
        const toml::array* arr = n.as_array();
        if (!arr) break;
        if (arr->size() != 2) {
          error(n, p.key + " in " + label + " must be an array of two numbers, got " + std::to_string(arr->size()) +
                       (arr->size() == 1 ? " item" : " items"));
          return std::nullopt;
        }
        auto v = array_of<double>(p, *arr, [&](const toml::node& i) { return number(i); });
        return v ? std::optional(sdk::ParamValue(sdk::FloatPair{(*v)[0], (*v)[1]})) : std::nullopt;
      }
    }
    error(n, p.key + " in " + label + " must be " + expected(p) + ", got " + described(n));
    return std::nullopt;
  }
};

std::string without_final_period(std::string text) {
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

std::vector<std::string> declared_keys(const sdk::ParamSpec& spec) {
  std::vector<std::string> keys;
  for (const auto& p : spec.params()) keys.push_back(p.key);
  return keys;
}

// Where a rule (or exclusive set) over `keys` is reported: at the key the
// user wrote last, since that is where the contradiction starts; nullopt
// when the table sets none of them.
std::optional<SourcePos> last_written(const toml::table& table, const std::vector<std::string>& keys,
                                      std::vector<std::string>* given = nullptr) {
  std::optional<SourcePos> last;
  for (const auto& k : keys) {
    auto it = table.find(k);
    if (it == table.end()) continue;
    if (given) given->push_back(k);
    SourcePos at = source_of(it->first, it->second);
    if (!last || (at.file == last->file && std::tie(at.line, at.column) > std::tie(last->line, last->column)))
      last = at;
  }
  return last;
}

// The spec's rules across keys, on values that each passed on their own. A
// rule that throws is a bug in the plugin, reported as a failed rule rather
// than lost.
void check_rules(const toml::table& table, const sdk::ParamSpec& spec, const std::string& label,
                 const std::map<std::string, sdk::ParamValue>& values, std::vector<Diagnostic>& diagnostics) {
  if (spec.rules().empty()) return;
  // Options needs a shared spec; this one outlives the call (aliasing, not owning).
  const sdk::Options options(std::shared_ptr<const sdk::ParamSpec>(std::shared_ptr<void>(), &spec), values);
  for (const auto& rule : spec.rules()) {
    std::string why;
    try {
      why = rule.check(options);
    } catch (const std::exception& e) {
      why = "the rule \"" + rule.doc + "\" failed: " + e.what();
    }
    if (why.empty()) continue;
    const SourcePos at = last_written(table, rule.keys).value_or(source_of(table));
    diagnostics.push_back({at, label + ": " + why});
  }
}

}  // namespace

std::map<std::string, sdk::ParamValue> validate_table(const toml::table& table, const sdk::ParamSpec& spec,
                                                       const std::string& label,
                                                       const std::vector<std::string>& reserved,
                                                       std::vector<Diagnostic>& diagnostics) {
  Checker check{label, diagnostics};
  const size_t errors_before = diagnostics.size();
  std::map<std::string, sdk::ParamValue> values;
  for (const auto& [key, node] : table) {
    const std::string k(key.str());
    if (std::find(reserved.begin(), reserved.end(), k) != reserved.end()) continue;
    const sdk::Param* p = spec.find(k);
    if (!p) {
      // A close match is most likely a typo; otherwise list what is accepted.
      const std::vector<std::string> keys = declared_keys(spec);
      std::string hint = closest_match(k, keys);
      std::string help = !hint.empty()   ? "; did you mean '" + hint + "'?"
                         : keys.empty() ? "; it takes no keys"
                                        : "; known keys: " + join(keys);
      diagnostics.push_back({source_of(key, node), "unknown key '" + k + "' in " + label + help});
      continue;
    }
    if (auto v = check.convert(*p, node)) values[k] = std::move(*v);
  }
  for (const auto& p : spec.params()) {
    if (p.required && !table.contains(p.key))
      diagnostics.push_back({source_of(table), label + " is missing the required key '" + p.key + "'" +
                                                   (p.doc.empty() ? "" : " (" + without_final_period(p.doc) + ")")});
  }
  for (const auto& set : spec.exclusive_sets()) {
    std::vector<std::string> given;
    std::optional<SourcePos> last = last_written(table, set, &given);
    if (given.size() > 1)
      diagnostics.push_back({*last, join(given, " and ") + " in " + label +
                                        " contradict each other; set only one of them"});
  }
  // Rules see typed values, so they run only on a table without other errors.
  if (diagnostics.size() == errors_before) check_rules(table, spec, label, values, diagnostics);
  return values;
}

sdk::Options options_from_assignments(const RegistryEntry& entry, const std::vector<std::string>& assignments,
                                      const std::string& label) {
  std::string text;
  for (const auto& a : assignments) text += a + "\n";
  toml::table table;
  try {
    table = toml::parse(std::string_view(text), std::string_view("--set"));
  } catch (const toml::parse_error& e) {
    const int line = static_cast<int>(e.source().begin.line);
    const std::string assignment = line >= 1 && line <= static_cast<int>(assignments.size()) ? assignments[line - 1] : "";
    throw ConfigError({{{"--set " + assignment, 0, static_cast<int>(e.source().begin.column)},
                        "not a TOML assignment (key = value): " + std::string(e.description())}});
  }
  std::vector<Diagnostic> diagnostics;
  auto values = validate_table(table, *entry.params, label, {}, diagnostics);
  if (!diagnostics.empty()) throw ConfigError(diagnostics);
  return sdk::Options(entry.params, values);
}

}  // namespace ftcore

// One TOML table against one ParamSpec: types, ranges, choices, required
// keys, unknown keys ("did you mean"), mutually exclusive keys.
#include <cmath>

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

struct Checker {
  const std::string& label;  // "[optimizer] (adamw)"
  std::vector<Diagnostic>& diagnostics;

  void error(const toml::node& at, const std::string& message) { diagnostics.push_back({source_of(at), message}); }

  std::optional<double> number(const toml::node& n) {
    if (auto i = n.value_exact<int64_t>()) return static_cast<double>(*i);
    if (auto d = n.value_exact<double>()) return *d;
    return std::nullopt;
  }

  bool in_range(const sdk::Param& p, const toml::node& at, double v, const std::string& shown) {
    if (!p.range || p.range->contains(v)) return true;
    error(at, p.key + " = " + shown + " in " + label + " is out of range: must be " + p.range->describe());
    return false;
  }

  std::string type_error(const sdk::Param& p, const toml::node& n) {
    return p.key + " in " + label + " must be " + expected(p) + ", got " + toml_type_name(n);
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

  template <typename T, typename Convert>
  std::optional<std::vector<T>> array_of(const sdk::Param& p, const toml::node& n, Convert convert) {
    const toml::array* arr = n.as_array();
    if (!arr) {
      error(n, type_error(p, n));
      return std::nullopt;
    }
    std::vector<T> out;
    bool ok = true;
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node& item = *arr->get(i);
      std::optional<T> v = convert(item);
      if (!v) {
        error(item, p.key + "[" + std::to_string(i) + "] in " + label + " must be " + expected(p) + ", got " +
                        toml_type_name(item));
        ok = false;
      } else {
        out.push_back(*v);
      }
    }
    return ok ? std::optional(out) : std::nullopt;
  }

  std::optional<sdk::ParamValue> convert(const sdk::Param& p, const toml::node& n) {
    switch (p.type) {
      case sdk::ParamType::Bool:
        if (auto b = n.value_exact<bool>()) return sdk::ParamValue(*b);
        break;
      case sdk::ParamType::Int:
        if (auto i = n.value_exact<int64_t>()) {
          if (!in_range(p, n, static_cast<double>(*i), std::to_string(*i))) return std::nullopt;
          return sdk::ParamValue(*i);
        }
        if (n.is_floating_point()) {
          error(n, p.key + " in " + label + " must be an integer, got the float " +
                       sdk::format_param_value(*n.value_exact<double>()));
          return std::nullopt;
        }
        break;
      case sdk::ParamType::Float:
        if (auto d = number(n)) {
          if (!in_range(p, n, *d, sdk::format_param_value(*d))) return std::nullopt;
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
          error(n, p.key + " = \"" + *s + "\" in " + label + " is not one of \"" + join(p.choices, "\", \"") + "\"" +
                       (hint.empty() ? "" : "; did you mean \"" + hint + "\"?"));
          return std::nullopt;
        }
        break;
      case sdk::ParamType::StringList: {
        if (auto s = n.value_exact<std::string>()) return sdk::ParamValue(std::vector<std::string>{*s});
        auto v = array_of<std::string>(p, n, [](const toml::node& i) { return i.value_exact<std::string>(); });
        return v ? std::optional(sdk::ParamValue(*v)) : std::nullopt;
      }
      case sdk::ParamType::IntList: {
        auto v = array_of<int64_t>(p, n, [&](const toml::node& i) -> std::optional<int64_t> {
          auto x = i.value_exact<int64_t>();
          if (x && !in_range(p, i, static_cast<double>(*x), std::to_string(*x))) return std::nullopt;
          return x;
        });
        return v ? std::optional(sdk::ParamValue(*v)) : std::nullopt;
      }
      case sdk::ParamType::FloatList: {
        auto v = array_of<double>(p, n, [&](const toml::node& i) -> std::optional<double> {
          auto x = number(i);
          if (x && !in_range(p, i, *x, sdk::format_param_value(*x))) return std::nullopt;
          return x;
        });
        return v ? std::optional(sdk::ParamValue(*v)) : std::nullopt;
      }
      case sdk::ParamType::Pair: {
        const toml::array* arr = n.as_array();
        if (!arr) break;
        if (arr->size() != 2) {
          error(n, p.key + " in " + label + " must be an array of two numbers, got " + std::to_string(arr->size()) +
                       " items");
          return std::nullopt;
        }
        auto v = array_of<double>(p, n, [&](const toml::node& i) -> std::optional<double> {
          auto x = number(i);
          if (x && !in_range(p, i, *x, sdk::format_param_value(*x))) return std::nullopt;
          return x;
        });
        return v ? std::optional(sdk::ParamValue(sdk::FloatPair{(*v)[0], (*v)[1]})) : std::nullopt;
      }
    }
    error(n, type_error(p, n));
    return std::nullopt;
  }
};

std::vector<std::string> declared_keys(const sdk::ParamSpec& spec) {
  std::vector<std::string> keys;
  for (const auto& p : spec.params()) keys.push_back(p.key);
  return keys;
}

}  // namespace

std::map<std::string, sdk::ParamValue> validate_table(const toml::table& table, const sdk::ParamSpec& spec,
                                                       const std::string& label,
                                                       const std::vector<std::string>& reserved,
                                                       std::vector<Diagnostic>& diagnostics) {
  Checker check{label, diagnostics};
  std::map<std::string, sdk::ParamValue> values;
  for (const auto& [key, node] : table) {
    const std::string k(key.str());
    if (std::find(reserved.begin(), reserved.end(), k) != reserved.end()) continue;
    const sdk::Param* p = spec.find(k);
    if (!p) {
      std::string hint = closest_match(k, declared_keys(spec));
      diagnostics.push_back({source_of(key, node), "unknown key '" + k + "' in " + label +
                                                       (hint.empty() ? "" : "; did you mean '" + hint + "'?")});
      continue;
    }
    if (auto v = check.convert(*p, node)) values[k] = std::move(*v);
  }
  for (const auto& p : spec.params()) {
    if (p.required && !table.contains(p.key))
      diagnostics.push_back({source_of(table), label + " is missing the required key '" + p.key + "'" +
                                                   (p.doc.empty() ? "" : " (" + p.doc + ")")});
  }
  for (const auto& set : spec.exclusive_sets()) {
    std::vector<std::string> given;
    const toml::node* last = nullptr;
    for (const auto& k : set) {
      if (const toml::node* n = table.get(k)) {
        given.push_back(k);
        last = n;
      }
    }
    if (given.size() > 1)
      diagnostics.push_back({source_of(*last), join(given, " and ") + " in " + label +
                                                   " contradict each other; set only one of them"});
  }
  return values;
}

}  // namespace ftcore

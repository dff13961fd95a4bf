// ParamSpec declarations and typed Options lookup (see params.h).
#include "ftcore/sdk/params.h"

#include "ftcore/sdk/option_error.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace ftcore::sdk {

const char* param_type_name(ParamType type) {
  switch (type) {
    case ParamType::Bool: return "bool";
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::String: return "string";
    case ParamType::Enum: return "enum";
    case ParamType::StringList: return "list of strings";
    case ParamType::IntList: return "list of ints";
    case ParamType::FloatList: return "list of floats";
    case ParamType::Pair: return "pair of floats";
  }
  return "?";
}

namespace {

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest text that reads back as the same double ("0.9", not "0.90000000000000002").
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), v);
  std::string s(buffer, result.ptr);
  // Keep floats recognisable as floats in TOML ("1.0", not "1").
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

template <typename T, typename F>
std::string format_list(const std::vector<T>& items, F format_item) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + format_item(items[i]);
  return out + "]";
}

}  // namespace

std::string format_param_value(const ParamValue& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "(unset)"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_number(d); }
    std::string operator()(const std::string& s) const { return quote(s); }
    std::string operator()(const std::vector<std::string>& v) const { return format_list(v, quote); }
    std::string operator()(const std::vector<int64_t>& v) const {
      return format_list(v, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<double>& v) const { return format_list(v, format_number); }
    std::string operator()(const FloatPair& p) const {
      return "[" + format_number(p.first) + ", " + format_number(p.second) + "]";
    }
  };
  return std::visit(Visitor{}, value);
}

bool Range::contains(double v) const {
  if (std::isnan(v)) return false;
  if (min_exclusive ? !(v > min) : !(v >= min)) return false;
  if (max_exclusive ? !(v < max) : !(v <= max)) return false;
  return true;
}

std::string Range::describe() const {
  bool has_min = !std::isinf(min), has_max = !std::isinf(max);
  auto num = [](double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  if (has_min && has_max)
    return std::string(min_exclusive ? "(" : "[") + num(min) + ", " + num(max) + (max_exclusive ? ")" : "]");
  if (has_min) return std::string(min_exclusive ? "> " : ">= ") + num(min);
  if (has_max) return std::string(max_exclusive ? "< " : "<= ") + num(max);
  return "any";
}

Param& Param::with_range(double lo, double hi, bool lo_exclusive, bool hi_exclusive) {
  range = Range{lo, hi, lo_exclusive, hi_exclusive};
  return *this;
}

Param& Param::with_length(size_t lo, size_t hi) {
  if (type != ParamType::StringList && type != ParamType::IntList && type != ParamType::FloatList)
    throw OptionsError("with_length() on " + key + ", which is not a list");
  if (lo > hi) throw OptionsError("with_length() on " + key + ": min " + std::to_string(lo) + " > max " + std::to_string(hi));
  min_items = lo;
  max_items = hi;
  return *this;
}

std::string Param::describe_length() const {
  const bool bounded = max_items != std::numeric_limits<size_t>::max();
  auto items = [](size_t n) { return std::to_string(n) + (n == 1 ? " item" : " items"); };
  if (bounded && min_items == max_items) return "exactly " + items(min_items);
  if (bounded) return std::to_string(min_items) + " to " + items(max_items);
  if (min_items > 0) return "at least " + items(min_items);
  return "";
}

Param& ParamSpec::add(Param p) {
  if (find(p.key)) throw OptionsError("parameter declared twice: " + p.key);
  params_.push_back(std::move(p));
  return params_.back();
}

Param& ParamSpec::add_bool(const std::string& key, bool d) {
  return add(Param{key, ParamType::Bool, d});
}
Param& ParamSpec::add_int(const std::string& key, std::optional<int64_t> d) {
  Param p{key, ParamType::Int};
  if (d) p.default_value = *d;
  return add(std::move(p));
}
Param& ParamSpec::add_float(const std::string& key, std::optional<double> d) {
  Param p{key, ParamType::Float};
  if (d) p.default_value = *d;
  return add(std::move(p));
}
Param& ParamSpec::add_string(const std::string& key, std::optional<std::string> d) {
  Param p{key, ParamType::String};
  if (d) p.default_value = *d;
  return add(std::move(p));
}
Param& ParamSpec::add_enum(const std::string& key, std::vector<std::string> choices,
                           std::optional<std::string> d) {
  Param p{key, ParamType::Enum};
  p.choices = std::move(choices);
  if (d) p.default_value = *d;
  return add(std::move(p));
}
Param& ParamSpec::add_string_list(const std::string& key, std::vector<std::string> d) {
  return add(Param{key, ParamType::StringList, std::move(d)});
}
Param& ParamSpec::add_int_list(const std::string& key, std::vector<int64_t> d) {
  return add(Param{key, ParamType::IntList, std::move(d)});
}
Param& ParamSpec::add_float_list(const std::string& key, std::vector<double> d) {
  return add(Param{key, ParamType::FloatList, std::move(d)});
}
Param& ParamSpec::add_pair(const std::string& key, std::optional<FloatPair> d) {
  Param p{key, ParamType::Pair};
  if (d) p.default_value = *d;
  return add(std::move(p));
}

ParamSpec& ParamSpec::exclusive(std::vector<std::string> keys) {
  for (const auto& k : keys)
    if (!find(k)) throw OptionsError("exclusive() names an undeclared parameter: " + k);
  exclusive_.push_back(std::move(keys));
  return *this;
}

ParamSpec& ParamSpec::rule(std::vector<std::string> keys, std::string doc,
                           std::function<std::string(const Options&)> check) {
  if (keys.empty()) throw OptionsError("rule() names no keys: " + doc);
  for (const auto& k : keys)
    if (!find(k)) throw OptionsError("rule() names an undeclared parameter: " + k);
  rules_.push_back({std::move(keys), std::move(doc), std::move(check)});
  return *this;
}

const Param* ParamSpec::find(const std::string& key) const {
  for (const auto& p : params_)
    if (p.key == key) return &p;
  return nullptr;
}

Options::Options(std::shared_ptr<const ParamSpec> spec, std::map<std::string, ParamValue> user_values)
    : spec_(std::move(spec)), user_(std::move(user_values)) {}

const Param& Options::declared(const std::string& key) const {
  const Param* p = spec_ ? spec_->find(key) : nullptr;
  if (!p) throw OptionsError("option not declared in the component's ParamSpec: " + key);
  return *p;
}

const ParamValue& Options::value(const std::string& key) const {
  const Param& p = declared(key);
  auto it = user_.find(key);
  return it != user_.end() ? it->second : p.default_value;
}

bool Options::has_value(const std::string& key) const {
  return !std::holds_alternative<std::monostate>(value(key));
}

namespace {
template <typename T>
const T& get_as(const ParamValue& v, const std::string& key, const char* wanted) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  if (std::holds_alternative<std::monostate>(v))
    throw OptionsError("option " + key + " has no value and no default (check has_value first)");
  throw OptionsError("option " + key + " is not a " + wanted);
}
}  // namespace

bool Options::get_bool(const std::string& key) const { return get_as<bool>(value(key), key, "bool"); }
int64_t Options::get_int(const std::string& key) const { return get_as<int64_t>(value(key), key, "int"); }
double Options::get_float(const std::string& key) const {
  const ParamValue& v = value(key);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return get_as<double>(v, key, "float");
}
const std::string& Options::get_string(const std::string& key) const {
  return get_as<std::string>(value(key), key, "string");
}
const std::vector<std::string>& Options::get_string_list(const std::string& key) const {
  return get_as<std::vector<std::string>>(value(key), key, "list of strings");
}
const std::vector<int64_t>& Options::get_int_list(const std::string& key) const {
  return get_as<std::vector<int64_t>>(value(key), key, "list of ints");
}
const std::vector<double>& Options::get_float_list(const std::string& key) const {
  return get_as<std::vector<double>>(value(key), key, "list of floats");
}
FloatPair Options::get_pair(const std::string& key) const { return get_as<FloatPair>(value(key), key, "pair"); }

void require_rules(const Options& options) {
  if (!options.spec()) return;
  for (const auto& rule : options.spec()->rules())
    if (std::string why = rule.check(options); !why.empty()) throw OptionError(why);
}

}  // namespace ftcore::sdk

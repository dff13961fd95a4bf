// ParamSpec: one declaration of a component's parameters, used three ways:
// the core validates recipe tables against it (all errors at once, with
// file:line:col), `ftcore plugins describe` prints it, and docs/recipes.md is
// generated from it. Components receive typed `Options`, never raw TOML, and
// can tell a value the user set from a default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace ftcore::sdk {

enum class ParamType { Bool, Int, Float, String, Enum, StringList, IntList, FloatList, Pair };

const char* param_type_name(ParamType type);

// A pair is two numbers, e.g. Adam's betas or Adafactor's eps pair.
using FloatPair = std::pair<double, double>;

using ParamValue = std::variant<std::monostate, bool, int64_t, double, std::string,
                                std::vector<std::string>, std::vector<int64_t>,
                                std::vector<double>, FloatPair>;

// Renders a value as TOML would spell it (used by describe, docs and recipe.lock.toml).
std::string format_param_value(const ParamValue& value);

// A numeric range; applies to Int, Float, every element of IntList/FloatList
// and both members of a Pair.
struct Range {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
  bool max_exclusive = false;
  bool contains(double v) const;
  std::string describe() const;  // "> 0", "[0, 1)", ...
};

struct Param {
  std::string key;
  ParamType type = ParamType::String;
  ParamValue default_value;            // monostate: no default
  bool required = false;
  std::optional<Range> range;
  std::vector<std::string> choices;    // Enum only
  std::string doc;
  // How many items a StringList, IntList or FloatList holds (Adan's betas:
  // exactly three); checked with the types and ranges, before any rule.
  size_t min_items = 0;
  size_t max_items = std::numeric_limits<size_t>::max();

  // Chainable setters, so a spec reads as one statement per parameter.
  Param& with_range(double min, double max, bool min_exclusive = false, bool max_exclusive = false);
  Param& at_least(double min) { return with_range(min, std::numeric_limits<double>::infinity()); }
  Param& above(double min) { return with_range(min, std::numeric_limits<double>::infinity(), true); }
  Param& make_required() { required = true; return *this; }
  Param& with_doc(std::string text) { doc = std::move(text); return *this; }
  Param& with_length(size_t exactly) { return with_length(exactly, exactly); }
  Param& with_length(size_t min, size_t max);
  std::string describe_length() const;  // "exactly 3 items", "1 to 4 items", "" when any length goes
};

class Options;

// A rule across keys ("nesterov needs momentum > 0"), checked once every key
// is valid on its own: `check` returns why the values cannot go together, or
// "" when they can. Recipe validation (`ftcore validate` as well as `run`)
// reports a broken rule at the line of the last of `keys` the user wrote, so
// it says what the plugin's factory would say, before anything loads.
struct KeyRule {
  std::vector<std::string> keys;
  std::string doc;  // for describe and docs/recipes.md: "nesterov = true needs momentum > 0 and dampening = 0"
  std::function<std::string(const Options&)> check;
};

// Keys of one component; at most one of each `exclusive` set may be given.
class ParamSpec {
 public:
  Param& add_bool(const std::string& key, bool default_value);
  Param& add_int(const std::string& key, std::optional<int64_t> default_value);
  Param& add_float(const std::string& key, std::optional<double> default_value);
  Param& add_string(const std::string& key, std::optional<std::string> default_value);
  Param& add_enum(const std::string& key, std::vector<std::string> choices,
                  std::optional<std::string> default_value);
  Param& add_string_list(const std::string& key, std::vector<std::string> default_value);
  Param& add_int_list(const std::string& key, std::vector<int64_t> default_value);
  Param& add_float_list(const std::string& key, std::vector<double> default_value);
  Param& add_pair(const std::string& key, std::optional<FloatPair> default_value);

  // Declares keys that contradict each other (e.g. warmup_steps and warmup_ratio).
  ParamSpec& exclusive(std::vector<std::string> keys);
  // Declares a rule across keys (see KeyRule); every key must be declared.
  ParamSpec& rule(std::vector<std::string> keys, std::string doc, std::function<std::string(const Options&)> check);

  const std::vector<Param>& params() const { return params_; }
  const std::vector<std::vector<std::string>>& exclusive_sets() const { return exclusive_; }
  const std::vector<KeyRule>& rules() const { return rules_; }
  const Param* find(const std::string& key) const;

 private:
  Param& add(Param p);
  std::vector<Param> params_;
  std::vector<std::vector<std::string>> exclusive_;
  std::vector<KeyRule> rules_;
};

// Thrown by Options accessors on a programming error (asking for an
// undeclared key, or with the wrong type). Never raised by user input: that
// is caught earlier, during validation, with a file:line:col.
class OptionsError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Validated, typed values of one component: every declared key resolves to
// the user's value or the spec's default.
class Options {
 public:
  Options() = default;
  Options(std::shared_ptr<const ParamSpec> spec, std::map<std::string, ParamValue> user_values);

  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  const std::vector<std::string>& get_string_list(const std::string& key) const;
  const std::vector<int64_t>& get_int_list(const std::string& key) const;
  const std::vector<double>& get_float_list(const std::string& key) const;
  FloatPair get_pair(const std::string& key) const;

  bool is_set_by_user(const std::string& key) const { return user_.count(key) != 0; }
  // True when the key has a value (from the user or a default).
  bool has_value(const std::string& key) const;
  const ParamValue& value(const std::string& key) const;
  const std::map<std::string, ParamValue>& user_values() const { return user_; }
  const ParamSpec* spec() const { return spec_.get(); }

 private:
  const Param& declared(const std::string& key) const;
  std::shared_ptr<const ParamSpec> spec_;  // shared: Options may outlive the registry
  std::map<std::string, ParamValue> user_;
};

// Throws sdk::OptionError (option_error.h) with the first of the spec's
// rules these options break: for factories, so options that never went
// through recipe validation are refused with the same sentence.
void require_rules(const Options& options);

}  // namespace ftcore::sdk

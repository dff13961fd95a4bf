// Reading a recipe: TOML parse with source positions, `base` inheritance
// (the derived file's keys override the base's; tables merge key by key,
// but a component section with its own `name` replaces the base's section;
// arrays, [[logger]] included, replace whole), and --set overrides parsed as
// TOML values.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ftcore/recipe.h"
#include "recipe_internal.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

// Line `line` (1-based) of `text`, without its line break.
std::string_view line_of(std::string_view text, size_t line) {
  size_t begin = 0;
  for (size_t i = 1; i < line && begin != std::string_view::npos; ++i) {
    begin = text.find('\n', begin);
    if (begin != std::string_view::npos) ++begin;
  }
  if (begin == std::string_view::npos || begin > text.size()) return {};
  std::string_view rest = text.substr(begin);
  rest = rest.substr(0, rest.find('\n'));
  if (!rest.empty() && rest.back() == '\r') rest.remove_suffix(1);
  return rest;
}

// Byte offset of 1-based code-point column `column` in `line` (toml++
// columns count code points).
size_t byte_offset(std::string_view line, size_t column) {
  size_t characters = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;
    if (++characters == column) return i;
  }
  return line.size();
}

// 1-based code-point column of byte offset `offset` in `line`.
int column_of(std::string_view line, size_t offset) {
  int column = 1;
  for (size_t i = 0; i < offset && i < line.size(); ++i) column += (static_cast<unsigned char>(line[i]) & 0xC0) != 0x80;
  return column;
}

struct SyntaxProblem {
  std::string message;
  int column;
};

// toml++'s words for the two commonest slips: a string left open ("unescaped
// control characters" at the line break, or "end-of-file") and text without
// quotes ("could not determine value type", or a word starting like `true`).
SyntaxProblem syntax_problem(const toml::parse_error& e, std::string_view text) {
  const std::string description(e.description());
  const int column = static_cast<int>(e.source().begin.column);
  const std::string_view line = line_of(text, e.source().begin.line);
  const size_t at = byte_offset(line, static_cast<size_t>(column));
  auto starts = [&](const char* prefix) { return description.rfind(prefix, 0) == 0; };
  if (starts("Error while parsing string") || starts("Error while parsing literal string")) {
    if (description.find("end-of-file") != std::string::npos)
      return {"unterminated string: the closing quote is missing before the end of the file", column};
    if (description.find("control characters") != std::string::npos && at >= line.size())
      return {"unterminated string: the closing quote is missing before the end of the line", column};
  }
  if (starts("Error while parsing value: could not determine value type") ||
      starts("Error while parsing boolean") || starts("Error while parsing floating-point")) {
    auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
    size_t begin = std::min(at, line.size()), end = begin;
    while (begin > 0 && word_char(line[begin - 1])) --begin;
    while (end < line.size() && word_char(line[end])) ++end;
    const std::string word(line.substr(begin, end - begin));
    if (!word.empty() && std::isalpha(static_cast<unsigned char>(word[0])) && begin > 0 &&
        std::string_view("=[,{ \t").find(line[begin - 1]) != std::string_view::npos) {
      return {word + " is not a TOML value; text needs quotes: \"" + word + "\"", column_of(line, begin)};
    }
  }
  // toml++ points a redefined key at its value; the key is what to fix.
  if (description.find("cannot redefine existing") != std::string::npos && description.size() > 2 &&
      description.back() == '\'') {
    const size_t open = description.rfind('\'', description.size() - 2);
    const std::string key = description.substr(open + 1, description.size() - open - 2);
    const size_t found = line.rfind(key, at);
    if (!key.empty() && found != std::string_view::npos) return {description, column_of(line, found)};
  }
  return {description, column};
}

toml::table parse_recipe_file(const fs::path& path, const SourcePos& referenced_from) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    if (referenced_from.file.empty()) throw ConfigError({{SourcePos{path.string(), 0, 0}, "recipe file not found"}});
    throw ConfigError({{referenced_from, "base recipe not found: " + path.string()}});
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  if (!in) throw ConfigError({{SourcePos{path.string(), 0, 0}, "cannot read the recipe file"}});
  const std::string text = content.str();
  try {
    return toml::parse(text, path.string());
  } catch (const toml::parse_error& e) {
    const SyntaxProblem problem = syntax_problem(e, text);
    throw ConfigError({{SourcePos{path.string(), static_cast<int>(e.source().begin.line), problem.column},
                        "TOML syntax error: " + problem.message}});
  }
}

bool is_component_section(std::string_view key) {
  return key == "adapter" || key == "quantizer" || key == "optimizer" || key == "scheduler" || key == "sampler";
}

// Moves every node of `src` into `dst`; nodes keep their source positions.
// Tables merge key by key, except a component section that names its plugin
// (`name = ...`): it replaces the base's section whole, since the base's
// other keys belong to the plugin it names.
void merge_into(toml::table& dst, toml::table&& src, bool top_level) {
  for (auto&& [key, node] : src) {
    toml::table* src_table = node.as_table();
    toml::table* dst_table = dst.get_as<toml::table>(key.str());
    const bool restarts = top_level && is_component_section(key.str()) && src_table && src_table->contains("name");
    if (src_table && dst_table && !restarts) {
      merge_into(*dst_table, std::move(*src_table), false);
    } else {
      dst.insert_or_assign(key, std::move(node));
    }
  }
}

toml::table load_with_bases(const fs::path& path, std::vector<fs::path>& chain, const SourcePos& referenced_from) {
  toml::table table = parse_recipe_file(path, referenced_from);
  const toml::node* base = table.get("base");
  if (!base) return table;
  auto base_name = base->value_exact<std::string>();
  if (!base_name) throw ConfigError({{source_of(*base), "base must be a string naming another recipe file"}});
  fs::path base_path = fs::path(*base_name).is_absolute() ? fs::path(*base_name) : path.parent_path() / *base_name;
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(base_path, ec);
  for (const auto& seen : chain) {
    if (seen == canonical) {
      std::string cycle;
      for (const auto& c : chain) cycle += c.filename().string() + " -> ";
      throw ConfigError({{source_of(*base), "base recipes form a cycle: " + cycle + canonical.filename().string()}});
    }
  }
  // Each level is a stack frame and an open file; no real recipe comes near this.
  constexpr size_t kMaxBaseDepth = 64;
  if (chain.size() >= kMaxBaseDepth)
    throw ConfigError({{source_of(*base), "base recipes nest deeper than " + std::to_string(kMaxBaseDepth) +
                                              " files (from " + chain.front().filename().string() + ")"}});
  chain.push_back(canonical);
  toml::table merged = load_with_bases(base_path, chain, source_of(*base));
  chain.pop_back();
  table.erase("base");
  merge_into(merged, std::move(table), true);
  return merged;
}

// A TOML basic string holding `s`; control characters are escaped so that
// anything typed after `=` can be read back as text.
std::string toml_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04X", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// `a.b.c` -> {a, b, c}; empty parts are kept so that they can be refused.
std::vector<std::string> split_dotted(const std::string& key) {
  std::vector<std::string> parts(1);
  for (char c : key) {
    if (c == '.')
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

std::string node_kind(const toml::node& n) {
  if (n.is_array()) return "an array";
  if (n.is_string()) return "a string";
  if (n.is_integer()) return "an integer";
  if (n.is_floating_point()) return "a float";
  if (n.is_boolean()) return "a boolean";
  return "a date/time";
}

// Parses `v = <text>` with `source` as the file name, so that every node it
// yields (tables included) points at the override in messages.
std::optional<toml::table> parse_override(const std::string& text, const std::string& source) {
  try {
    toml::table parsed = toml::parse("v = " + text, source);
    if (parsed.size() == 1 && parsed.contains("v")) return parsed;
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

// `optimizer.lr=3e-4` -> table["optimizer"]["lr"] = 3e-4. The value is TOML;
// a bare word that is not valid TOML (say `cosine`) is taken as a string.
// A number indexes an array of tables: `logger.1.precision=2` sets the
// second [[logger]] (indices count from 0). Missing tables are created.
void apply_override(toml::table& root, const std::string& item, std::vector<Diagnostic>& diagnostics) {
  const std::string source = "--set " + item;
  const SourcePos where{source, 0, 0};
  const size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0) {
    diagnostics.push_back({where, "expected --set section.key=value"});
    return;
  }
  const std::string key = item.substr(0, eq), text = item.substr(eq + 1);
  const std::vector<std::string> parts = split_dotted(key);
  for (const auto& p : parts) {
    if (p.empty()) {
      diagnostics.push_back({where, "empty component in key '" + key + "'"});
      return;
    }
  }
  if (key == "base") {
    diagnostics.push_back({where, "base cannot be overridden: it is read before --set applies"});
    return;
  }
  std::optional<toml::table> parsed = parse_override(text, source);
  if (!parsed) parsed = parse_override(toml_quote(text), source);
  if (!parsed) {
    diagnostics.push_back({where, "the value is neither TOML nor text (is it valid UTF-8?)"});
    return;
  }
  toml::node* container = &root;
  std::string walked;  // the key up to `container`, for messages
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (toml::table* t = container->as_table()) {
      if (!t->contains(part)) t->insert(part, std::move(*parse_override("{}", source)->get_as<toml::table>("v")));
      container = t->get(part);
    } else if (toml::array* a = container->as_array()) {
      char* end = nullptr;
      const long index = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0' || index < 0 || static_cast<size_t>(index) >= a->size()) {
        diagnostics.push_back({where, "'" + part + "' is not an index of " + walked + ": it has " +
                                          std::to_string(a->size()) + (a->size() == 1 ? " entry" : " entries") +
                                          ", numbered from 0"});
        return;
      }
      container = a->get(static_cast<size_t>(index));
    } else {
      diagnostics.push_back({where, "cannot set '" + key + "': " + walked + " is " + node_kind(*container) +
                                        ", not a table"});
      return;
    }
    walked += (i ? "." : "") + part;
  }
  toml::table* target = container->as_table();
  if (!target) {
    diagnostics.push_back({where, "cannot set '" + key + "': " + walked + " is " + node_kind(*container) +
                                      ", not a table"});
    return;
  }
  target->insert_or_assign(parts.back(), std::move(*parsed->get("v")));
}

}  // namespace

toml::table load_recipe_table(const fs::path& path, const std::vector<std::string>& overrides) {
  std::vector<fs::path> chain;
  std::error_code ec;
  chain.push_back(fs::weakly_canonical(path, ec));
  toml::table table = load_with_bases(path, chain, SourcePos{});
  std::vector<Diagnostic> diagnostics;
  resolve_input_paths(table);
  for (const auto& item : overrides) apply_override(table, item, diagnostics);
  if (!diagnostics.empty()) throw ConfigError(std::move(diagnostics));
  return table;
}

std::vector<fs::path> recipe_plugin_paths(const toml::table& table) {
  std::vector<fs::path> out;
  for (const toml::node* item : plugin_path_nodes(table)) {
    fs::path p(*item->value_exact<std::string>());
    // Relative to the file that wrote it; a --set path is relative to the working folder.
    const auto& file = item->source().path;
    if (p.is_relative() && file && file->rfind("--set", 0) != 0) p = fs::path(*file).parent_path() / p;
    out.push_back(p);
  }
  return out;
}

std::vector<const toml::node*> plugin_path_nodes(const toml::table& table) {
  std::vector<const toml::node*> out;
  const toml::node* paths = table["plugins"]["paths"].node();
  if (!paths) return out;
  auto add = [&](const toml::node& item) {
    if (item.is_string()) out.push_back(&item);  // other types are reported by validation
  };
  if (const toml::array* array = paths->as_array()) {
    for (const auto& item : *array) add(item);
  } else {
    add(*paths);  // `paths = "plugins"`: one folder
  }
  return out;
}

}  // namespace ftcore

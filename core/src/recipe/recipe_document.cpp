// Reading a recipe: TOML parse with source positions, `base` inheritance
// (the derived file's keys override the base's, tables merge key by key,
// arrays and values replace), and --set overrides parsed as TOML values.
#include <fstream>
#include <sstream>

#include "ftcore/recipe.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

toml::table parse_recipe_file(const fs::path& path, const SourcePos& referenced_from) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    SourcePos where = referenced_from.file.empty() ? SourcePos{path.string(), 0, 0} : referenced_from;
    throw ConfigError({{where, "recipe file not found: " + path.string()}});
  }
  try {
    return toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    throw ConfigError({{SourcePos{path.string(), static_cast<int>(src.begin.line), static_cast<int>(src.begin.column)},
                        "TOML syntax error: " + std::string(e.description())}});
  }
}

// Moves every node of `src` into `dst`; nodes keep their source positions.
void merge_into(toml::table& dst, toml::table&& src) {
  for (auto&& [key, node] : src) {
    toml::table* src_table = node.as_table();
    toml::table* dst_table = dst.get_as<toml::table>(key.str());
    if (src_table && dst_table) {
      merge_into(*dst_table, std::move(*src_table));
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
  chain.push_back(canonical);
  toml::table merged = load_with_bases(base_path, chain, source_of(*base));
  chain.pop_back();
  table.erase("base");
  merge_into(merged, std::move(table));
  return merged;
}

std::string toml_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> split_dotted(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream in(key);
  std::string part;
  while (std::getline(in, part, '.')) parts.push_back(part);
  return parts;
}

// `optimizer.lr=3e-4` -> table["optimizer"]["lr"] = 3e-4. The value is TOML;
// a bare word that is not valid TOML (say `cosine`) is taken as a string.
void apply_override(toml::table& root, const std::string& item, std::vector<Diagnostic>& diagnostics) {
  const SourcePos where{"--set " + item, 0, 0};
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
  toml::table parsed;
  const std::string source = "--set " + item;
  try {
    const std::string doc = "v = " + text;
    parsed = toml::parse(std::string_view(doc), std::string_view(source));
  } catch (const toml::parse_error&) {
    const std::string doc = "v = " + toml_quote(text);
    parsed = toml::parse(std::string_view(doc), std::string_view(source));
  }
  toml::node* container = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (toml::table* t = container->as_table()) {
      if (!t->contains(part)) t->insert(part, toml::table{});
      container = t->get(part);
    } else if (toml::array* a = container->as_array()) {
      char* end = nullptr;
      long index = std::strtol(part.c_str(), &end, 10);
      if (*end != '\0' || index < 0 || static_cast<size_t>(index) >= a->size()) {
        diagnostics.push_back({where, "'" + part + "' is not an index of the array " + key.substr(0, key.find(part))});
        return;
      }
      container = a->get(static_cast<size_t>(index));
    } else {
      diagnostics.push_back({where, "cannot set '" + key + "': '" + parts[i - 1] + "' is not a table"});
      return;
    }
  }
  toml::table* target = container->as_table();
  if (!target) {
    diagnostics.push_back({where, "cannot set '" + key + "': its parent is not a table"});
    return;
  }
  toml::node* value = parsed.get("v");
  target->insert_or_assign(parts.back(), std::move(*value));
}

}  // namespace

toml::table load_recipe_table(const fs::path& path, const std::vector<std::string>& overrides) {
  std::vector<fs::path> chain;
  std::error_code ec;
  chain.push_back(fs::weakly_canonical(path, ec));
  toml::table table = load_with_bases(path, chain, SourcePos{});
  std::vector<Diagnostic> diagnostics;
  for (const auto& item : overrides) apply_override(table, item, diagnostics);
  if (!diagnostics.empty()) throw ConfigError(std::move(diagnostics));
  return table;
}

std::vector<fs::path> recipe_plugin_paths(const toml::table& table) {
  std::vector<fs::path> out;
  const toml::array* paths = table["plugins"]["paths"].as_array();
  if (!paths) return out;
  for (const auto& item : *paths) {
    auto s = item.value_exact<std::string>();
    if (!s) continue;  // reported by validation
    fs::path p(*s);
    if (p.is_relative() && item.source().path) p = fs::path(*item.source().path).parent_path() / p;
    out.push_back(p);
  }
  return out;
}

}  // namespace ftcore

// Whole-recipe validation: sections, plugin names, each table against its
// ParamSpec; every problem is collected before a single ConfigError.
#include <algorithm>
#include <sstream>
#include <tuple>

#include "ftcore/recipe.h"
#include "ftcore/plugin_loader.h"
#include "recipe_internal.h"

namespace fs = std::filesystem;

namespace ftcore {

namespace {

// The plugin name that means "no component here".
constexpr const char* kNoComponent = "none";

struct ComponentSection {
  const char* section;
  sdk::ComponentKind kind;
  const char* default_name;  // used when the section is absent; nullptr: optional
  bool repeatable;           // may be an array of tables ([[logger]])
};

// One section per component kind (sdk/component_kinds.h), in recipe order.
const std::vector<ComponentSection>& component_sections() {
  static const std::vector<ComponentSection> sections = [] {
    std::vector<std::pair<int, ComponentSection>> ranked = {
#define FTCORE_KIND_SECTION(Type, name, rank, default_name, repeatable, ...) \
  {rank, {#name, sdk::ComponentKind::Type, default_name, repeatable}},
        FTCORE_COMPONENT_KINDS(FTCORE_KIND_SECTION)
#undef FTCORE_KIND_SECTION
    };
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<ComponentSection> out;
    for (const auto& [rank, section] : ranked) out.push_back(section);
    return out;
  }();
  return sections;
}

std::vector<std::string> all_section_names() {
  std::vector<std::string> names = core_section_names();
  for (const auto& s : component_sections()) names.emplace_back(s.section);
  return names;
}

class RecipeValidator {
 public:
  RecipeValidator(const fs::path& path, const PluginRegistry& registry) : path_(path), registry_(registry) {}

  sdk::Options core_section(const toml::table& root, const std::string& name) {
    auto spec = core_section_spec(name);
    const toml::node* node = root.get(name);
    if (!node) {
      // Absent section: its required keys are still required.
      toml::table empty;
      std::vector<Diagnostic> missing;
      validate_table(empty, *spec, "[" + name + "]", {}, missing);
      for (auto& d : missing) diagnostics_.push_back({{path_.string(), 0, 0}, "no [" + name + "] section: " + d.message});
      return sdk::Options(spec, {});
    }
    const toml::table* table = node->as_table();
    if (!table) {
      diagnostics_.push_back({source_of(*node), name + " must be a table: write [" + name + "]"});
      return sdk::Options(spec, {});
    }
    return sdk::Options(spec, validate_table(*table, *spec, "[" + name + "]", {}, diagnostics_));
  }

  // A [plugins] folder that does not exist is most likely a typo; unreported,
  // it would only surface as an "unknown optimizer" further down.
  void plugin_folders(const toml::table& root) {
    const std::vector<const toml::node*> nodes = plugin_path_nodes(root);
    const std::vector<fs::path> resolved = recipe_plugin_paths(root);
    for (size_t i = 0; i < nodes.size() && i < resolved.size(); ++i) {
      std::error_code ec;
      if (!fs::is_directory(resolved[i], ec))
        diagnostics_.push_back({source_of(*nodes[i]), "plugin folder not found: " + resolved[i].string()});
    }
  }

  std::optional<ComponentConfig> component(const toml::table& table, const ComponentSection& s,
                                           const std::string& label) {
    const toml::node* name_node = table.get("name");
    // `--set optimizer.lr=1e-4` on a recipe without [optimizer] tunes the
    // default component; a section written in a file must say which one.
    const bool made_by_set = table.source().path && table.source().path->rfind("--set", 0) == 0;
    if (!name_node && made_by_set && s.default_name) {
      if (auto c = default_component(s)) {
        c->options = sdk::Options(c->entry->params, validate_table(table, *c->entry->params,
                                                                   label + " (" + s.default_name + ")", {}, diagnostics_));
        return c;
      }
      return std::nullopt;
    }
    if (!name_node) {
      diagnostics_.push_back({source_of(table), label + " needs name = \"...\" choosing the " + s.section +
                                                    " (known: " + known(s.kind) + ")"});
      return std::nullopt;
    }
    auto name = name_node->value_exact<std::string>();
    if (!name) {
      diagnostics_.push_back({source_of(*name_node), "name in " + label + " must be a string naming the " +
                                                         s.section + " (known: " + known(s.kind) + ")"});
      return std::nullopt;
    }
    // `name = "none"` drops a section a base recipe gave (a full fine-tune
    // over a LoRA base); only optional sections can be dropped.
    if (*name == kNoComponent) {
      if (s.default_name) {
        diagnostics_.push_back({source_of(*name_node), label + " cannot be \"none\": a run needs one (the default is \"" +
                                                           s.default_name + "\")"});
      } else if (table.size() > 1) {
        for (const auto& [key, node] : table)
          if (key.str() != "name")
            diagnostics_.push_back({source_of(key, node), std::string(key.str()) + " in " + label +
                                                              ": name = \"none\" drops the section, it takes no other keys"});
      }
      return std::nullopt;
    }
    const RegistryEntry* entry = registry_.find(s.kind, *name);
    if (!entry) {
      std::string hint = closest_match(*name, registry_.names(s.kind));
      diagnostics_.push_back({source_of(*name_node), "unknown " + std::string(s.section) + " \"" + *name +
                                                         "\" in " + label + " (known: " + known(s.kind) + ")" +
                                                         (hint.empty() ? "" : "; did you mean \"" + hint + "\"?")});
      return std::nullopt;
    }
    ComponentConfig config;
    config.section = s.section;
    config.entry = entry;
    config.where = source_of(table);
    config.options = sdk::Options(
        entry->params, validate_table(table, *entry->params, label + " (" + *name + ")", {"name"}, diagnostics_));
    return config;
  }

  std::optional<ComponentConfig> default_component(const ComponentSection& s) {
    const RegistryEntry* entry = registry_.find(s.kind, s.default_name);
    if (!entry) {
      diagnostics_.push_back({{path_.string(), 0, 0}, "no [" + std::string(s.section) + "] section and the default " +
                                                          s.section + " '" + s.default_name +
                                                          "' is not on the plugin path (known: " + known(s.kind) + ")"});
      return std::nullopt;
    }
    ComponentConfig config;
    config.section = s.section;
    config.entry = entry;
    config.where = {path_.string(), 0, 0};
    config.options = sdk::Options(entry->params, {});
    return config;
  }

  void unknown_sections(const toml::table& root) {
    const auto names = all_section_names();
    for (const auto& [key, node] : root) {
      const std::string k(key.str());
      if (std::find(names.begin(), names.end(), k) != names.end()) continue;
      std::string hint = closest_match(k, names);
      diagnostics_.push_back({source_of(key, node), "unknown section [" + k + "]" +
                                                        (hint.empty() ? "" : "; did you mean [" + hint + "]?") +
                                                        " (sections: " + join(names) + ")"});
    }
  }

  std::string known(sdk::ComponentKind kind) const {
    auto names = registry_.names(kind);
    return names.empty() ? "none on the plugin path" : join(names);
  }

  std::vector<Diagnostic>& diagnostics() { return diagnostics_; }

 private:
  fs::path path_;
  const PluginRegistry& registry_;
  std::vector<Diagnostic> diagnostics_;
};

// Sections are checked in a fixed order and toml++ tables iterate by key, so
// the problems are sorted as a reader meets them: the recipe's own lines,
// then its base files, then the --set overrides.
void sort_in_reading_order(std::vector<Diagnostic>& diagnostics, const fs::path& path) {
  auto order = [&](const Diagnostic& d) {
    const int group = d.where.file == path.string() ? 0 : d.where.file.rfind("--set", 0) == 0 ? 2 : 1;
    return std::make_tuple(group, group == 1 ? d.where.file : std::string(), d.where.line, d.where.column);
  };
  std::stable_sort(diagnostics.begin(), diagnostics.end(),
                   [&](const Diagnostic& a, const Diagnostic& b) { return order(a) < order(b); });
}

// The Recipe's typed field for each kind; the compiler's -Wswitch names a
// kind added to the table without a field here.
void store_components(Recipe& recipe, sdk::ComponentKind kind, std::vector<ComponentConfig> found) {
  switch (kind) {
    case sdk::ComponentKind::Adapter: if (!found.empty()) recipe.adapter = found[0]; break;
    case sdk::ComponentKind::Quantizer: if (!found.empty()) recipe.quantizer = found[0]; break;
    case sdk::ComponentKind::Sampler: if (!found.empty()) recipe.sampler = found[0]; break;
    case sdk::ComponentKind::Optimizer: if (!found.empty()) recipe.optimizer = found[0]; break;
    case sdk::ComponentKind::Scheduler: if (!found.empty()) recipe.scheduler = found[0]; break;
    case sdk::ComponentKind::Logger: recipe.loggers = std::move(found); break;
  }
}

bool is_repeatable_section(const std::string& section) {
  for (const auto& s : component_sections())
    if (section == s.section) return s.repeatable;
  return false;
}

}  // namespace

Recipe validate_recipe(const toml::table& root, const fs::path& path, const PluginRegistry& registry) {
  RecipeValidator v(path, registry);
  Recipe recipe;
  recipe.path = path;
  v.unknown_sections(root);
  recipe.model = v.core_section(root, "model");
  recipe.data = v.core_section(root, "data");
  recipe.train = v.core_section(root, "train");
  recipe.calibration = v.core_section(root, "calibration");
  recipe.distributed = v.core_section(root, "distributed");
  v.core_section(root, "plugins");
  v.plugin_folders(root);
  check_recipe_inputs(root, v.diagnostics());

  for (const auto& s : component_sections()) {
    const toml::node* node = root.get(s.section);
    std::vector<ComponentConfig> found;
    if (!node) {
      if (s.default_name)
        if (auto c = v.default_component(s)) found.push_back(std::move(*c));
    } else if (const toml::table* table = node->as_table()) {
      if (auto c = v.component(*table, s, "[" + std::string(s.section) + "]")) found.push_back(std::move(*c));
    } else if (const toml::array* array = node->as_array(); array && s.repeatable) {
      const std::string label = "[[" + std::string(s.section) + "]]";
      for (size_t i = 0; i < array->size(); ++i) {
        const toml::table* t = array->get(i)->as_table();
        if (!t) {
          v.diagnostics().push_back({source_of(*array->get(i)), "each " + label + " entry must be a table"});
          continue;
        }
        if (auto c = v.component(*t, s, label + " #" + std::to_string(i + 1))) found.push_back(std::move(*c));
      }
    } else {
      // `optimizer = "adamw"` is a likely first guess: show the section it means.
      const auto name = node->value_exact<std::string>();
      v.diagnostics().push_back({source_of(*node), std::string(s.section) + " must be a table: write [" +
                                                       s.section + "]" +
                                                       (s.repeatable ? " or [[" + std::string(s.section) + "]]" : "") +
                                                       (name ? " with name = \"" + *name + "\"" : "")});
    }
    store_components(recipe, s.kind, std::move(found));
  }
  if (!v.diagnostics().empty()) {
    sort_in_reading_order(v.diagnostics(), path);
    throw ConfigError(std::move(v.diagnostics()));
  }
  return recipe;
}

std::vector<const ComponentConfig*> Recipe::components() const {
  std::vector<const ComponentConfig*> out;
  if (adapter) out.push_back(&*adapter);
  if (quantizer) out.push_back(&*quantizer);
  out.push_back(&optimizer);
  out.push_back(&scheduler);
  if (sampler) out.push_back(&*sampler);
  for (const auto& l : loggers) out.push_back(&l);
  return out;
}

namespace {
bool in_exclusive_set(const sdk::ParamSpec& spec, const std::string& key) {
  for (const auto& set : spec.exclusive_sets())
    if (std::find(set.begin(), set.end(), key) != set.end()) return true;
  return false;
}

// Every resolved key, so the lock shows what ran; but of keys that exclude
// each other only the one the user gave (writing every default too would make
// the lock contradict itself when run).
//
// `input_paths` are written absolute: the lock lives in the run folder, and
// a relative path there would resolve against it.
void write_options(std::ostringstream& out, const sdk::Options& options,
                   const std::vector<std::string>& input_paths = {}) {
  for (const auto& p : options.spec()->params()) {
    const auto& value = options.value(p.key);
    if (std::holds_alternative<std::monostate>(value)) continue;
    if (!options.is_set_by_user(p.key) && in_exclusive_set(*options.spec(), p.key)) continue;
    if (std::find(input_paths.begin(), input_paths.end(), p.key) != input_paths.end()) {
      out << p.key << " = " << sdk::format_param_value(fs::absolute(std::get<std::string>(value)).lexically_normal().string()) << "\n";
      continue;
    }
    out << p.key << " = " << sdk::format_param_value(value) << "\n";
  }
}
}  // namespace

std::string Recipe::lock_toml() const {
  std::ostringstream out;
  out << "# Every key resolved (defaults included) from " << path.string() << "\n";
  out << "\n[model]\n";
  write_options(out, model, {"path", "tokenizer_path"});
  out << "\n[data]\n";
  write_options(out, data, {"path"});
  out << "\n[train]\n";
  write_options(out, train);
  if (quantizer) {  // calibration rows matter only to a quantizer
    out << "\n[calibration]\n";
    write_options(out, calibration);
  }
  if (std::any_of(distributed.spec()->params().begin(), distributed.spec()->params().end(),
                  [&](const sdk::Param& p) { return distributed.is_set_by_user(p.key); })) {
    out << "\n[distributed]\n";
    write_options(out, distributed);
  }
  for (const ComponentConfig* c : components()) {
    out << "\n" << (is_repeatable_section(c->section) ? "[[" + c->section + "]]" : "[" + c->section + "]") << "\n";
    out << "name = \"" << c->entry->name << "\"\n";
    write_options(out, c->options);
    out << "# plugin " << c->entry->library_version() << " from " << c->entry->library_path().string() << "\n";
  }
  return out.str();
}

}  // namespace ftcore

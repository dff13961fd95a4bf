// The recipe library API: load_recipe_table() (base inheritance, --set
// overrides) and validate_recipe() (typed Options, defaults, lock_toml,
// [plugins] paths), against the in-tree plugins. The CLI's messages are
// pinned by the corpus in recipe_bad_corpus_test.cpp.
#include <fstream>

#include "ftcore/recipe.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ftcore;

namespace {

class RecipeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new PluginRegistry();
    PluginLoadReport report = ftcore::testing::load_in_tree_plugins(*registry_);
    ASSERT_TRUE(report.refused.empty());
  }
  static void TearDownTestSuite() {
    delete registry_;
    registry_ = nullptr;
  }

  // The inputs the recipes below name, relative to the scratch folder they
  // are written in: validation checks that they exist (recipe_inputs.cpp).
  void SetUp() override {
    for (const char* folder : {"", "shared/", "recipes/", "bases/"}) write_inputs(folder);
    write("m/config.json", kTinyConfig);
  }

  static constexpr const char* kTinyConfig =
      R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 64, "hidden_size": 16,
          "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
          "max_position_embeddings": 4096})";

  void write_inputs(const std::string& folder) {
    write(folder + "models/tiny/config.json", kTinyConfig);
    write(folder + "data/train.jsonl", "{\"instruction\": \"Name a colour.\", \"input\": \"\", \"output\": \"Blue.\"}\n");
  }

  // Writes `content` to `name` under the scratch folder (creating folders).
  fs::path write(const std::string& name, const std::string& content) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }

  Recipe load(const fs::path& path, const std::vector<std::string>& overrides = {}) {
    return validate_recipe(load_recipe_table(path, overrides), path, *registry_);
  }

  // The diagnostics of a recipe that must fail, from loading or validation.
  std::vector<Diagnostic> errors_of(const fs::path& path, const std::vector<std::string>& overrides = {}) {
    try {
      load(path, overrides);
    } catch (const ConfigError& e) {
      return e.diagnostics();
    }
    ADD_FAILURE() << path << " validated";
    return {};
  }

  static PluginRegistry* registry_;
  ftcore::testing::TempDir dir_;
};

PluginRegistry* RecipeTest::registry_ = nullptr;

const char* kMinimal = R"(
[model]
path = "models/tiny"

[data]
path = "data/train.jsonl"
)";

std::string file_of(const toml::node& node) { return node.source().path ? *node.source().path : ""; }

}  // namespace

// ---- base inheritance ------------------------------------------------------

TEST_F(RecipeTest, DerivedKeysOverrideAndTablesMergeKeyByKey) {
  const fs::path base = write("base.toml", R"(
[model]
path = "models/tiny"
dtype = "bf16"

[data]
path = "data/train.jsonl"
sequence_len = 2048

[optimizer]
name = "adamw"
lr = 3e-4
weight_decay = 0.1

[[logger]]
name = "console"

[[logger]]
name = "jsonl"
)");
  const fs::path derived = write("derived.toml", R"(
base = "base.toml"

[data]
sequence_len = 512

[optimizer]
lr = 1e-4

[[logger]]
name = "console"
precision = 2
)");
  const toml::table table = load_recipe_table(derived, {});
  EXPECT_FALSE(table.contains("base"));
  EXPECT_EQ(table["data"]["sequence_len"].value<int64_t>(), 512);
  // Relative to the file that wrote it.
  EXPECT_EQ(table["data"]["path"].value<std::string>(), (dir_ / "data/train.jsonl").lexically_normal().string());
  EXPECT_EQ(table["model"]["dtype"].value<std::string>(), "bf16");
  EXPECT_EQ(table["optimizer"]["lr"].value<double>(), 1e-4);
  EXPECT_EQ(table["optimizer"]["weight_decay"].value<double>(), 0.1);

  // Each node remembers the file that wrote it.
  EXPECT_EQ(file_of(*table["data"]["sequence_len"].node()), derived.string());
  EXPECT_EQ(file_of(*table["data"]["path"].node()), base.string());
  EXPECT_EQ(table["data"]["path"].node()->source().begin.line, 7u);

  // Arrays (and so [[logger]] lists) are replaced, not appended to.
  const Recipe recipe = validate_recipe(table, derived, *registry_);
  ASSERT_EQ(recipe.loggers.size(), 1u);
  EXPECT_EQ(recipe.loggers[0].name(), "console");
  EXPECT_EQ(recipe.loggers[0].options.get_int("precision"), 2);
  EXPECT_DOUBLE_EQ(recipe.optimizer.options.get_float("lr"), 1e-4);
  EXPECT_DOUBLE_EQ(recipe.optimizer.options.get_float("weight_decay"), 0.1);
}

TEST_F(RecipeTest, AComponentSectionThatNamesItsPluginStartsAfresh) {
  write("base.toml", std::string(kMinimal) + "\n[scheduler]\nname = \"linear\"\nwarmup_steps = 100\n");
  const fs::path derived = write("derived.toml", "base = \"base.toml\"\n[scheduler]\nname = \"cosine\"\nwarmup_ratio = 0.1\n");
  const Recipe recipe = load(derived);
  EXPECT_EQ(recipe.scheduler.name(), "cosine");
  EXPECT_FALSE(recipe.scheduler.options.is_set_by_user("warmup_steps"));
  EXPECT_TRUE(recipe.scheduler.options.is_set_by_user("warmup_ratio"));
}

TEST_F(RecipeTest, BasesChainAndResolveAgainstTheFileThatNamesThem) {
  write("shared/root.toml", std::string(kMinimal) + "\n[train]\nseed = 7\nmicro_batch_size = 2\n");
  write("shared/middle.toml", "base = \"root.toml\"\n[train]\nmicro_batch_size = 4\n");
  const fs::path leaf = write("recipes/leaf.toml", "base = \"../shared/middle.toml\"\n[train]\nlogging_steps = 1\n");
  const Recipe recipe = load(leaf);
  EXPECT_EQ(recipe.train.get_int("seed"), 7);
  EXPECT_EQ(recipe.train.get_int("micro_batch_size"), 4);
  EXPECT_EQ(recipe.train.get_int("logging_steps"), 1);
}

TEST_F(RecipeTest, AnErrorInAnInheritedKeyNamesTheBaseFile) {
  const fs::path base = write("bases/base.toml", std::string(kMinimal) + "\n[optimizer]\nname = \"adamw\"\nlr = -1.0\n");
  const fs::path derived = write("derived.toml", "base = \"bases/base.toml\"\n[optimizer]\nweight_decay = -2\n");
  const std::vector<Diagnostic> errors = errors_of(derived);
  ASSERT_EQ(errors.size(), 2u);
  // The recipe's own lines come first, then its base's.
  EXPECT_EQ(errors[0].where.file, derived.string());
  EXPECT_EQ(errors[0].where.line, 3);
  EXPECT_NE(errors[0].message.find("weight_decay = -2"), std::string::npos) << errors[0].message;
  EXPECT_EQ(errors[1].where.file, base.string());
  EXPECT_EQ(errors[1].where.line, 10);
  EXPECT_EQ(errors[1].where.column, 6);
  EXPECT_NE(errors[1].message.find("lr = -1.0"), std::string::npos) << errors[1].message;
}

TEST_F(RecipeTest, AMissingBaseIsReportedAtTheBaseKey) {
  const fs::path derived = write("derived.toml", "# comment\nbase = \"nowhere.toml\"\n");
  const std::vector<Diagnostic> errors = errors_of(derived);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].where.file, derived.string());
  EXPECT_EQ(errors[0].where.line, 2);
  EXPECT_EQ(errors[0].where.column, 8);
  EXPECT_EQ(errors[0].message, "base recipe not found: " + (dir_ / "nowhere.toml").string());
}

TEST_F(RecipeTest, ABaseCycleIsRefusedWithTheChain) {
  const fs::path a = write("a.toml", "base = \"b.toml\"\n");
  write("b.toml", "base = \"c.toml\"\n");
  write("c.toml", "base = \"a.toml\"\n");
  const std::vector<Diagnostic> errors = errors_of(a);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].where.file, (dir_ / "c.toml").string());
  EXPECT_EQ(errors[0].message, "base recipes form a cycle: a.toml -> b.toml -> c.toml -> a.toml");

  const fs::path self = write("self.toml", "base = \"self.toml\"\n");
  EXPECT_EQ(errors_of(self).at(0).message, "base recipes form a cycle: self.toml -> self.toml");
}

TEST_F(RecipeTest, BaseMustBeAString) {
  const fs::path recipe = write("r.toml", "base = 3\n");
  EXPECT_EQ(errors_of(recipe).at(0).message, "base must be a string naming another recipe file");
}

// ---- --set overrides -------------------------------------------------------

TEST_F(RecipeTest, SetParsesTomlValuesAndTakesBareWordsAsStrings) {
  const fs::path recipe = write("r.toml", kMinimal);
  const toml::table table =
      load_recipe_table(recipe, {"optimizer.lr=1e-4", "train.seed=7", "train.gradient_checkpointing=true",
                                 "optimizer.betas=[0.8, 0.9]", "scheduler.name=cosine", "model.dtype=\"bf16\"",
                                 "train.run_name=\"42\"", "data.field="});
  EXPECT_EQ(table["optimizer"]["lr"].node()->type(), toml::node_type::floating_point);
  EXPECT_EQ(table["train"]["seed"].node()->type(), toml::node_type::integer);
  EXPECT_EQ(table["train"]["gradient_checkpointing"].value<bool>(), true);
  EXPECT_EQ(table["optimizer"]["betas"].as_array()->size(), 2u);
  EXPECT_EQ(table["scheduler"]["name"].value<std::string>(), "cosine");
  EXPECT_EQ(table["model"]["dtype"].value<std::string>(), "bf16");
  EXPECT_EQ(table["train"]["run_name"].value<std::string>(), "42");  // quoted: stays a string
  EXPECT_EQ(table["data"]["field"].value<std::string>(), "");
  // A value from --set points at the override.
  EXPECT_EQ(file_of(*table["train"]["seed"].node()), "--set train.seed=7");

  const Recipe r = validate_recipe(table, recipe, *registry_);
  EXPECT_EQ(r.scheduler.name(), "cosine");
  EXPECT_EQ(r.train.get_int("seed"), 7);
  EXPECT_EQ(r.optimizer.options.get_pair("betas"), (sdk::FloatPair{0.8, 0.9}));
}

TEST_F(RecipeTest, SetOverridesAValueFromTheFileAndTheLastSetWins) {
  const fs::path recipe = write("r.toml", std::string(kMinimal) + "\n[train]\nseed = 1\n");
  const Recipe r = load(recipe, {"train.seed=2", "train.seed=3"});
  EXPECT_EQ(r.train.get_int("seed"), 3);
}

TEST_F(RecipeTest, SetCreatesSectionsAndTunesDefaultComponents) {
  const fs::path recipe = write("r.toml", "[model]\npath = \"m\"\n");
  // A --set path is relative to the working folder: given absolute here.
  const Recipe r = load(recipe, {"data.path=" + (dir_ / "data/train.jsonl").string(), "optimizer.lr=5e-5", "scheduler.name=linear",
                                 "scheduler.warmup_steps=10"});
  EXPECT_EQ(r.data.get_string("path"), (dir_ / "data/train.jsonl").string());
  EXPECT_EQ(r.optimizer.name(), "adamw");  // the default, now with the user's lr
  EXPECT_TRUE(r.optimizer.options.is_set_by_user("lr"));
  EXPECT_DOUBLE_EQ(r.optimizer.options.get_float("lr"), 5e-5);
  EXPECT_EQ(r.scheduler.name(), "linear");
  EXPECT_EQ(r.scheduler.options.get_int("warmup_steps"), 10);
}

TEST_F(RecipeTest, SetIndexesLoggerEntriesFromZero) {
  const fs::path recipe =
      write("r.toml", std::string(kMinimal) + "\n[[logger]]\nname = \"console\"\n\n[[logger]]\nname = \"console\"\n");
  const Recipe r = load(recipe, {"logger.1.precision=2"});
  ASSERT_EQ(r.loggers.size(), 2u);
  EXPECT_FALSE(r.loggers[0].options.is_set_by_user("precision"));
  EXPECT_EQ(r.loggers[1].options.get_int("precision"), 2);
}

TEST_F(RecipeTest, BadSetsAreReportedAtTheOverride) {
  const fs::path recipe = write("r.toml", std::string(kMinimal) + "\n[[logger]]\nname = \"console\"\n");
  auto only_error = [&](const std::string& item) {
    const std::vector<Diagnostic> errors = errors_of(recipe, {item});
    EXPECT_EQ(errors.size(), 1u) << item;
    if (errors.empty()) return std::string();
    EXPECT_EQ(errors[0].where.file, "--set " + item);
    EXPECT_EQ(errors[0].str().rfind("--set " + item + ": ", 0), 0u) << errors[0].str();
    return errors[0].message;
  };
  EXPECT_EQ(only_error("optimizer"), "expected --set section.key=value");
  EXPECT_EQ(only_error("=3"), "expected --set section.key=value");
  EXPECT_EQ(only_error("optimizer..lr=1"), "empty component in key 'optimizer..lr'");
  EXPECT_EQ(only_error("optimizer.lr.=1"), "empty component in key 'optimizer.lr.'");
  EXPECT_EQ(only_error("logger.1.precision=2"), "'1' is not an index of logger: it has 1 entry, numbered from 0");
  EXPECT_EQ(only_error("logger.x.precision=2"), "'x' is not an index of logger: it has 1 entry, numbered from 0");
  EXPECT_EQ(only_error("model.path.x=1"), "cannot set 'model.path.x': model.path is a string, not a table");
  EXPECT_EQ(only_error("base=other.toml"), "base cannot be overridden: it is read before --set applies");
  EXPECT_EQ(only_error("data.field=\xff"), "the value is neither TOML nor text (is it valid UTF-8?)");
  // Well-formed overrides with bad values fail validation, still located at the override.
  EXPECT_EQ(only_error("optimizer.lr=abc"), "lr in [optimizer] (adamw) must be a number, got the string \"abc\"");
  EXPECT_EQ(only_error("train.seed=-1"), "seed = -1 in [train] is out of range: must be >= 0");
  EXPECT_EQ(only_error("tarin.seed=1").rfind("unknown section [tarin]; did you mean [train]?", 0), 0u);
}

TEST_F(RecipeTest, SetValuesWithControlCharactersStayText) {
  const fs::path recipe = write("r.toml", kMinimal);
  const toml::table table = load_recipe_table(recipe, {"train.run_name=a\nb = 2", "data.field=x\ty\"z"});
  EXPECT_EQ(table["train"]["run_name"].value<std::string>(), "a\nb = 2");
  EXPECT_EQ(table["data"]["field"].value<std::string>(), "x\ty\"z");
}

// ---- Options resolution ----------------------------------------------------

TEST_F(RecipeTest, OptionsResolveToDefaultsAndKnowWhatTheUserSet) {
  const fs::path recipe = write("r.toml", std::string(kMinimal) + R"(
[train]
micro_batch_size = 8

[optimizer]
name = "adamw"
lr = 2e-5
)");
  const Recipe r = load(recipe);
  EXPECT_EQ(r.path, recipe);
  EXPECT_EQ(r.model.get_string("path"), (recipe.parent_path() / "models/tiny").lexically_normal().string());
  EXPECT_EQ(r.model.get_string("dtype"), "auto");
  EXPECT_FALSE(r.model.is_set_by_user("dtype"));
  EXPECT_FALSE(r.model.has_value("tokenizer_path"));  // no default, not set
  EXPECT_EQ(r.train.get_int("micro_batch_size"), 8);
  EXPECT_TRUE(r.train.is_set_by_user("micro_batch_size"));
  EXPECT_EQ(r.train.get_int("gradient_accumulation_steps"), 1);
  EXPECT_FALSE(r.train.is_set_by_user("gradient_accumulation_steps"));
  EXPECT_DOUBLE_EQ(r.train.get_float("num_epochs"), 1.0);
  EXPECT_DOUBLE_EQ(r.optimizer.options.get_float("lr"), 2e-5);
  EXPECT_TRUE(r.optimizer.options.is_set_by_user("lr"));
  EXPECT_DOUBLE_EQ(r.optimizer.options.get_float("weight_decay"), 0.01);
  EXPECT_FALSE(r.optimizer.options.is_set_by_user("weight_decay"));
  EXPECT_EQ(r.optimizer.options.get_pair("betas"), (sdk::FloatPair{0.9, 0.999}));
  EXPECT_FALSE(r.optimizer.options.user_values().count("name"));  // `name` picks, it is not an option
}

TEST_F(RecipeTest, AbsentComponentSectionsGetTheDefaultComponents) {
  const Recipe r = load(write("r.toml", kMinimal));
  EXPECT_EQ(r.optimizer.name(), "adamw");
  EXPECT_EQ(r.scheduler.name(), "constant");
  ASSERT_EQ(r.loggers.size(), 1u);
  EXPECT_EQ(r.loggers[0].name(), "console");
  EXPECT_FALSE(r.adapter.has_value());
  EXPECT_FALSE(r.quantizer.has_value());
  EXPECT_FALSE(r.sampler.has_value());
  EXPECT_TRUE(r.optimizer.options.user_values().empty());
  EXPECT_EQ(r.components().size(), 3u);
}

TEST_F(RecipeTest, IntegersAreAcceptedForFloatsButNotTheOtherWayAround) {
  const fs::path ok = write("ok.toml", std::string(kMinimal) + "\n[train]\nnum_epochs = 3\n");
  EXPECT_DOUBLE_EQ(load(ok).train.get_float("num_epochs"), 3.0);
  const fs::path bad = write("bad.toml", std::string(kMinimal) + "\n[train]\nseed = 3.0\n");
  EXPECT_EQ(errors_of(bad).at(0).message, "seed in [train] must be an integer, got the float 3.0");
}

TEST_F(RecipeTest, ValidationReportsEveryProblemInReadingOrder) {
  const fs::path recipe = write("r.toml", R"([optimizer]
name = "adamw"
weight_decay = -1
lr = 0

[model]
path = 3
)");
  const std::vector<Diagnostic> errors = errors_of(recipe);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].where.line, 0);  // the missing [data]: the file, no line
  EXPECT_NE(errors[0].message.find("no [data] section"), std::string::npos);
  EXPECT_EQ(errors[1].where.line, 3);
  EXPECT_EQ(errors[2].where.line, 4);
  EXPECT_EQ(errors[3].where.line, 7);
  EXPECT_EQ(errors[3].message, "path in [model] must be a string, got the integer 3");
}

// ---- lock_toml ---------------------------------------------------------------

TEST_F(RecipeTest, LockTomlHoldsEveryResolvedKeyAndReadsBackToTheSameOptions) {
  const fs::path recipe = write("r.toml", std::string(kMinimal) + R"(
[train]
micro_batch_size = 4
eval_steps = 50

[optimizer]
name = "adamw"
lr = 3e-4
betas = [0.9, 0.95]

[scheduler]
name = "cosine"
warmup_ratio = 0.03

[[logger]]
name = "console"

[[logger]]
name = "jsonl"
file = "m.jsonl"
)");
  const Recipe r = load(recipe);
  const std::string lock = r.lock_toml();
  const toml::table parsed = toml::parse(std::string_view(lock), std::string_view("recipe.lock.toml"));

  auto expect_every_key = [&](const sdk::Options& options, const toml::table* section, const std::string& where) {
    ASSERT_NE(section, nullptr) << where << " missing from\n" << lock;
    for (const auto& p : options.spec()->params()) {
      if (!options.has_value(p.key)) {
        EXPECT_FALSE(section->contains(p.key)) << where << "." << p.key << " has no value yet is locked";
        continue;
      }
      EXPECT_TRUE(section->contains(p.key)) << where << "." << p.key << " missing from\n" << lock;
    }
  };
  expect_every_key(r.model, parsed["model"].as_table(), "model");
  expect_every_key(r.data, parsed["data"].as_table(), "data");
  expect_every_key(r.train, parsed["train"].as_table(), "train");
  expect_every_key(r.optimizer.options, parsed["optimizer"].as_table(), "optimizer");
  expect_every_key(r.scheduler.options, parsed["scheduler"].as_table(), "scheduler");
  const toml::array* loggers = parsed["logger"].as_array();
  ASSERT_NE(loggers, nullptr) << lock;
  ASSERT_EQ(loggers->size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    expect_every_key(r.loggers[i].options, loggers->get(i)->as_table(), "logger." + std::to_string(i));
  EXPECT_EQ(parsed["scheduler"]["name"].value<std::string>(), "cosine");
  EXPECT_NE(lock.find("libftcore_optimizer_adamw.so"), std::string::npos) << lock;

  // The lock is itself a recipe that resolves to the same values.
  const Recipe again = validate_recipe(parsed, "recipe.lock.toml", *registry_);
  auto same = [](const sdk::Options& a, const sdk::Options& b, const std::string& where) {
    for (const auto& p : a.spec()->params())
      EXPECT_EQ(sdk::format_param_value(a.value(p.key)), sdk::format_param_value(b.value(p.key))) << where << "." << p.key;
  };
  same(r.model, again.model, "model");
  same(r.data, again.data, "data");
  same(r.train, again.train, "train");
  ASSERT_EQ(again.components().size(), r.components().size());
  for (size_t i = 0; i < r.components().size(); ++i) {
    EXPECT_EQ(again.components()[i]->name(), r.components()[i]->name());
    same(r.components()[i]->options, again.components()[i]->options, r.components()[i]->section);
  }
}

// ---- [plugins] paths -------------------------------------------------------

TEST_F(RecipeTest, PluginPathsResolveAgainstTheFileThatNamesThem) {
  fs::create_directories(dir_ / "recipes" / "plugins");
  fs::create_directories(dir_ / "bases" / "shared_plugins");
  write("bases/base.toml", std::string(kMinimal) + "\n[plugins]\npaths = [\"shared_plugins\", \"/opt/abs\"]\n");
  const fs::path recipe = write("recipes/r.toml", "base = \"../bases/base.toml\"\n");
  EXPECT_EQ(recipe_plugin_paths(load_recipe_table(recipe, {})),
            (std::vector<fs::path>{dir_ / "recipes" / "../bases" / "shared_plugins", "/opt/abs"}));

  const fs::path own = write("recipes/own.toml", std::string(kMinimal) + "\n[plugins]\npaths = \"plugins\"\n");
  EXPECT_EQ(recipe_plugin_paths(load_recipe_table(own, {})), (std::vector<fs::path>{dir_ / "recipes" / "plugins"}));
  EXPECT_NO_THROW(load(own));

  // From --set: relative to the working folder, as any command-line path.
  EXPECT_EQ(recipe_plugin_paths(load_recipe_table(own, {"plugins.paths=[\"cli/plugins\"]"})),
            (std::vector<fs::path>{"cli/plugins"}));
  EXPECT_TRUE(recipe_plugin_paths(load_recipe_table(write("none.toml", kMinimal), {})).empty());
}

TEST_F(RecipeTest, AMissingPluginFolderIsReportedAtItsEntry) {
  const fs::path recipe = write("r.toml", std::string(kMinimal) + "\n[plugins]\npaths = [\"missing\"]\n");
  const std::vector<Diagnostic> errors = errors_of(recipe);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].where.line, 9);
  EXPECT_EQ(errors[0].where.column, 10);
  EXPECT_EQ(errors[0].message, "plugin folder not found: " + (dir_ / "missing").string());
}

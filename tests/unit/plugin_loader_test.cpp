// The loader and registry: ABI and libtorch checks (with forged fixture
// plugins), duplicate keys, search order, and that an object created by a
// plugin keeps its library loaded after the registry is gone.
#include <dlfcn.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <torch/headeronly/version.h>

#include "ftcore/plugin_loader.h"
#include "ftcore/sdk/logger.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ftcore;

namespace {

fs::path fixture(const std::string& folder) {
  return fs::path(FTCORE_FIXTURE_DIR) / folder / ("libftcore_logger_fixture_" + folder + ".so");
}

std::string refusal_of(const fs::path& file) {
  PluginRegistry registry;
  try {
    load_plugin_library(file, registry);
  } catch (const PluginRefused& e) {
    EXPECT_TRUE(registry.entries().empty()) << "nothing from a refused library may be registered";
    return e.what();
  }
  ADD_FAILURE() << file << " was not refused";
  return "";
}

bool is_loaded(const fs::path& file) {
  void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h) ::dlclose(h);
  return h != nullptr;
}

}  // namespace

TEST(PluginLoader, LoadsEveryInTreePlugin) {
  PluginRegistry registry;
  PluginLoadReport report = ftcore::testing::load_in_tree_plugins(registry);
  EXPECT_TRUE(report.refused.empty());
  for (const char* key : {"optimizer/adamw", "logger/console", "logger/jsonl", "scheduler/constant",
                          "scheduler/cosine", "scheduler/linear", "scheduler/warmup_stable_decay"}) {
    bool found = false;
    for (const auto* e : registry.entries()) found |= e->key() == key;
    EXPECT_TRUE(found) << key;
  }
}

TEST(PluginLoader, RefusesAWrongAbiVersionNamingBothVersionsAndTheFile) {
  const fs::path file = fixture("wrong_abi");
  const std::string message = refusal_of(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("built for ftcore plugin ABI 999"), std::string::npos) << message;
  EXPECT_NE(message.find("supports plugin ABI " + std::to_string(FTCORE_PLUGIN_ABI_VERSION)), std::string::npos)
      << message;
}

TEST(PluginLoader, RefusesAnotherLibtorchVersionNamingBoth) {
  const fs::path file = fixture("wrong_torch");
  const std::string message = refusal_of(file);
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("built against libtorch 1.0.0"), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("runs libtorch ") + TORCH_VERSION), std::string::npos) << message;
}

TEST(PluginLoader, ChecksTheAbiVersionBeforeAnyOtherField) {
  // A block from a future ABI may have any layout after its first field.
  struct FutureInfo {
    uint32_t abi_version = FTCORE_PLUGIN_ABI_VERSION + 1;
    uint32_t garbage[32] = {};
  } future;
  std::string reason = check_plugin_info(*reinterpret_cast<const ftcore_plugin_info_t*>(&future), "future.so");
  EXPECT_NE(reason.find("plugin ABI " + std::to_string(FTCORE_PLUGIN_ABI_VERSION + 1)), std::string::npos) << reason;

  ftcore_plugin_info_t small{FTCORE_PLUGIN_ABI_VERSION, 8, "x", "1", "MIT", TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI,
                             FTCORE_SDK_VERSION, nullptr};
  reason = check_plugin_info(small, "small.so");
  EXPECT_NE(reason.find("info block is 8 bytes"), std::string::npos) << reason;
}

TEST(PluginLoader, RefusedLibrariesAreReportedNotFatalWhenScanning) {
  PluginRegistry registry;
  PluginSearchOptions search;
  search.explicit_paths = {fixture("wrong_abi").parent_path(), fixture("good").parent_path()};
  search.use_environment = search.use_default_paths = false;
  PluginLoadReport report = load_plugins(search, registry);
  ASSERT_EQ(report.refused.size(), 1u);
  EXPECT_EQ(report.refused[0].path, fixture("wrong_abi"));
  EXPECT_NE(registry.find(sdk::ComponentKind::Logger, "fixture_good"), nullptr);
}

TEST(PluginLoader, AKeyClaimedTwiceIsAnErrorNamingBothFiles) {
  PluginRegistry registry;
  ftcore::testing::load_in_tree_plugins(registry);
  const RegistryEntry* console = registry.find(sdk::ComponentKind::Logger, "console");
  ASSERT_NE(console, nullptr);
  const fs::path first = console->library_path();
  try {
    load_plugin_library(fixture("duplicate"), registry);
    FAIL() << "duplicate key accepted";
  } catch (const RegistryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("logger/console is claimed by both"), std::string::npos) << m;
    EXPECT_NE(m.find(first.string()), std::string::npos) << m;
    EXPECT_NE(m.find(fixture("duplicate").string()), std::string::npos) << m;
  }
  // The first owner keeps the key.
  EXPECT_EQ(registry.find(sdk::ComponentKind::Logger, "console")->library_path(), first);
}

TEST(PluginLoader, AnObjectKeepsItsLibraryLoadedAfterTheRegistryIsGone) {
  const fs::path file = fixture("good");
  ASSERT_FALSE(is_loaded(file));
  std::shared_ptr<sdk::Logger> logger;
  {
    PluginRegistry registry;
    load_plugin_library(file, registry);
    const RegistryEntry* e = registry.find(sdk::ComponentKind::Logger, "fixture_good");
    ASSERT_NE(e, nullptr);
    logger = registry.create_logger(*e, ftcore::testing::options_for(*e));
  }  // registry, entries and the loader's handle are gone
  ASSERT_TRUE(is_loaded(file)) << "the library was unloaded while an object from it lives";
  // Virtual calls into plugin code would crash if the library were unmapped.
  logger->open({"lifetime", "/tmp", {}});
  logger->log_text(7, "tag", "hello");
  logger->close();
  {
    void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(h, nullptr);
    auto transcript = reinterpret_cast<const char* (*)()>(::dlsym(h, "ftcore_fixture_transcript"));
    ASSERT_NE(transcript, nullptr);
    EXPECT_STREQ(transcript(), "open lifetime;text 7 tag hello;close;");
    ::dlclose(h);
  }
  logger.reset();  // runs the destructor (plugin code), then releases the library
  EXPECT_FALSE(is_loaded(file)) << "the library should unload once its last object is gone";
}

TEST(PluginSearchPath, ExplicitThenEnvironmentThenDefaultsAndNeverTheCurrentDirectory) {
  ftcore::testing::TempDir explicit_dir, env_dir, cwd;
  ::setenv("FTCORE_PLUGIN_PATH", (env_dir.path().string() + ":").c_str(), 1);
  PluginSearchOptions search;
  search.explicit_paths = {explicit_dir.path()};
  const fs::path old_cwd = fs::current_path();
  fs::current_path(cwd.path());
  auto path = plugin_search_path(search);
  fs::current_path(old_cwd);
  ::unsetenv("FTCORE_PLUGIN_PATH");
  ASSERT_GE(path.size(), 3u);
  EXPECT_EQ(path[0], fs::canonical(explicit_dir.path()));
  EXPECT_EQ(path[1], fs::canonical(env_dir.path()));
  EXPECT_EQ(path[2], fs::canonical(FTCORE_PLUGIN_DIR)) << "then the folder beside libftcore";
  for (const auto& p : path) EXPECT_NE(p, fs::canonical(cwd.path())) << "the current directory is never searched";
}

TEST(PluginSearchPath, AnEarlierFolderShadowsALibraryOfTheSameName) {
  ftcore::testing::TempDir first;
  fs::copy_file(fixture("good"), first / fixture("good").filename().string());
  PluginRegistry registry;
  PluginSearchOptions search;
  search.explicit_paths = {first.path(), fixture("good").parent_path()};
  search.use_environment = search.use_default_paths = false;
  PluginLoadReport report = load_plugins(search, registry);
  ASSERT_EQ(report.loaded.size(), 1u);
  EXPECT_EQ(registry.find(sdk::ComponentKind::Logger, "fixture_good")->library_path().parent_path(),
            fs::canonical(first.path()));
}

TEST(PluginLoader, AnErrorFromAPluginOutlivesTheObjectThatThrewIt) {
  // The logger (and the registry) die while the exception unwinds; the
  // c10::Error still points into the library, so the library must stay mapped.
  std::string message;
  try {
    PluginRegistry registry;
    load_plugin_library(fixture("good"), registry);
    const RegistryEntry* e = registry.find(sdk::ComponentKind::Logger, "fixture_good");
    auto logger = registry.create_logger(*e, ftcore::testing::options_for(*e));
    logger->log_text(1, "fail", "on purpose");
  } catch (const std::exception& e) {
    message = e.what();  // would read unmapped memory if the library were gone
  }
  EXPECT_NE(message.find("fixture failure: on purpose"), std::string::npos) << message;
  EXPECT_NE(message.find("fixture_plugin.cpp"), std::string::npos) << message;
}

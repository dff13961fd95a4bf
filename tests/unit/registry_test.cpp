// The registry keeps the type of a factory's error: an sdk::OptionError
// (option values that cannot be honoured together; `ftcore run` exits 2)
// stays an OptionError, anything else becomes a std::runtime_error (exit 1);
// both are prefixed with the component key. Checked for built-in entries and
// for a plugin library (tests/fixtures/factory_error_fixture.cpp), whose
// exception types cross a shared-library boundary.
#include <gtest/gtest.h>

#include "ftcore/plugin_loader.h"
#include "ftcore/sdk/logger.h"
#include "ftcore/sdk/option_error.h"
#include "ftcore/sdk/scheduler.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace ftcore;

namespace {

sdk::Options no_options() { return sdk::Options(std::make_shared<const sdk::ParamSpec>(), {}); }

// Calls `create` and returns the message of the OptionError it threw.
template <typename Create>
std::string option_error_of(Create&& create) {
  try {
    create();
  } catch (const sdk::OptionError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected sdk::OptionError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing was thrown";
  return "";
}

// Calls `create` and returns the message of the runtime_error (not an
// OptionError) it threw.
template <typename Create>
std::string runtime_error_of(Create&& create) {
  try {
    create();
  } catch (const sdk::OptionError& e) {
    ADD_FAILURE() << "a runtime failure was reported as an OptionError: " << e.what();
    return "";
  } catch (const std::runtime_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected std::runtime_error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "nothing was thrown";
  return "";
}

}  // namespace

TEST(RegistryFactoryErrors, AnOptionErrorStaysAnOptionErrorPrefixedWithTheKey) {
  PluginRegistry registry;
  registry.add_scheduler({"picky", "", sdk::ParamSpec()},
                         [](const sdk::Options&, const sdk::SchedulerContext&) -> std::unique_ptr<sdk::Scheduler> {
                           throw sdk::OptionError("warmup_steps must be below total steps");
                         });
  const RegistryEntry* entry = registry.find(sdk::ComponentKind::Scheduler, "picky");
  ASSERT_NE(entry, nullptr);
  const std::string message =
      option_error_of([&] { registry.create_scheduler(*entry, no_options(), sdk::SchedulerContext{}); });
  EXPECT_EQ(message, "scheduler/picky: warmup_steps must be below total steps");
}

TEST(RegistryFactoryErrors, AnyOtherErrorBecomesARuntimeErrorPrefixedWithTheKey) {
  PluginRegistry registry;
  registry.add_logger({"broken", "", sdk::ParamSpec()}, [](const sdk::Options&) -> std::unique_ptr<sdk::Logger> {
    throw std::invalid_argument("not an OptionError");  // a logic_error, reported as a runtime failure
  });
  registry.add_logger({"empty", "", sdk::ParamSpec()},
                      [](const sdk::Options&) -> std::unique_ptr<sdk::Logger> { return nullptr; });
  const RegistryEntry* broken = registry.find(sdk::ComponentKind::Logger, "broken");
  const RegistryEntry* empty = registry.find(sdk::ComponentKind::Logger, "empty");
  ASSERT_NE(broken, nullptr);
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(runtime_error_of([&] { registry.create_logger(*broken, no_options()); }),
            "logger/broken: not an OptionError");
  const std::string nothing = runtime_error_of([&] { registry.create_logger(*empty, no_options()); });
  EXPECT_EQ(nothing.rfind("logger/empty: ", 0), 0u) << nothing;
  EXPECT_NE(nothing.find("the plugin's factory returned nothing"), std::string::npos) << nothing;
}

TEST(RegistryFactoryErrors, TypesSurviveThePluginLibraryBoundary) {
  PluginRegistry registry;
  load_plugin_library(
      fs::path(FTCORE_FIXTURE_DIR) / "factory_errors" / "libftcore_logger_fixture_factory_errors.so", registry);
  const RegistryEntry* rejects = registry.find(sdk::ComponentKind::Logger, "fixture_option_error");
  const RegistryEntry* fails = registry.find(sdk::ComponentKind::Logger, "fixture_runtime_error");
  ASSERT_NE(rejects, nullptr);
  ASSERT_NE(fails, nullptr);
  EXPECT_EQ(option_error_of([&] { registry.create_logger(*rejects, ftcore::testing::options_for(*rejects)); }),
            "logger/fixture_option_error: flush_every = 0 is not supported with buffered = true");
  EXPECT_EQ(runtime_error_of([&] { registry.create_logger(*fails, ftcore::testing::options_for(*fails)); }),
            "logger/fixture_runtime_error: cannot open /nonexistent/events");
}

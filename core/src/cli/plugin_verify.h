// `ftcore plugin verify`'s checks, one function per component kind, each
// adding its lines to the report (verify_report.h). `library` is the .so
// the component came from: the optimizer's fresh-process round trip loads
// exactly that file again in a child `ftcore plugin steps`.
#pragma once

#include <filesystem>

#include "ftcore/registry.h"
#include "verify_report.h"

namespace ftcore::cli {

// Every kind: the defaults satisfy the spec's own rules.
void verify_spec(const RegistryEntry& entry, VerifyReport& report);

void verify_optimizer(const PluginRegistry& registry, const RegistryEntry& entry,
                      const std::filesystem::path& library, const std::filesystem::path& work_dir,
                      VerifyReport& report);
void verify_scheduler(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report);
void verify_sampler(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report);
void verify_quantizer(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report);
// The sdk/testing.h checks on tiny random Llamas built here (verify_adapter.cpp).
void verify_adapter(const PluginRegistry& registry, const RegistryEntry& entry, VerifyReport& report);
void verify_logger(const PluginRegistry& registry, const RegistryEntry& entry,
                   const std::filesystem::path& work_dir, VerifyReport& report);

}  // namespace ftcore::cli

// The ftcore subcommands; each returns a process exit code:
// 0 ok, 1 runtime failure, 2 usage or config error.
#pragma once

#include <string>
#include <vector>

namespace ftcore::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int run_command(const std::vector<std::string>& args);
int validate_command(const std::vector<std::string>& args);
int plugins_command(const std::vector<std::string>& args);
int plugin_command(const std::vector<std::string>& args);
int convert_command(const std::vector<std::string>& args);
int generate_command(const std::vector<std::string>& args);
int merge_command(const std::vector<std::string>& args);
int quantize_command(const std::vector<std::string>& args);
int data_command(const std::vector<std::string>& args);
int ab_command(const std::vector<std::string>& args);
int print_version();

}  // namespace ftcore::cli

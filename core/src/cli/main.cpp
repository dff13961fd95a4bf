// The ftcore executable: global options, then one subcommand, each in its
// own file (<command>_command.cpp):
//   ftcore [--log-level L] (run|validate|plugins|plugin|convert|data|generate|merge|quantize) ...
//   ftcore --version | --help
// Exit codes: 0 ok, 1 runtime failure, 2 usage or config error.
#include <iostream>
#include <string>
#include <vector>

#include <boost/program_options/errors.hpp>
#include <spdlog/cfg/helpers.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "commands.h"
#include "ftcore/diagnostics.h"
#include "ftcore/runtime.h"
#include "session.h"

namespace {

const char* kUsage =
    "Usage: ftcore [--log-level LEVEL] COMMAND [options]\n"
    "\n"
    "Commands:\n"
    "  run RECIPE        fine-tune as the recipe says\n"
    "  validate RECIPE   check a recipe; all errors as file:line:col (exit 2)\n"
    "  plugins           list components; `plugins describe NAME` shows parameters\n"
    "  plugin verify X   conformance checks of a plugin library (.so or component name)\n"
    "  plugin steps      run an optimizer plugin on tensors from a file (reference tests)\n"
    "  convert IN OUT    a GGUF model to an HF folder\n"
    "  data inspect R    the recipe's dataset as the trainer sees it (tokens, masks)\n"
    "  generate          text from a model: --model DIR (--prompt TEXT | --chat TEXT)\n"
    "  merge             fold a PEFT adapter into its model: --model DIR --adapter DIR --out DIR\n"
    "  quantize          quantize a model (nf4, fp4, gptq): --model DIR --quantizer NAME --out DIR\n"
    "  ab A.toml B.toml  A/B test recipes over paired seeds; `ab EXPERIMENT.toml`, `ab report DIR`\n"
    "\n"
    "Global options:\n"
    "  --version         ftcore, libtorch, C++ ABI and CUDA facts\n"
    "  --log-level L     trace, debug, info, warn, error, off (default: info)\n"
    "  -h, --help        this help; `ftcore COMMAND --help` for a command\n";

// Pulls --log-level out of the arguments wherever it appears.
bool take_log_level(std::vector<std::string>& args, std::string* level) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--log-level") {
      if (i + 1 >= args.size()) return false;
      *level = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
      return true;
    }
    if (args[i].rfind("--log-level=", 0) == 0) {
      *level = args[i].substr(12);
      args.erase(args.begin() + i);
      return true;
    }
  }
  return true;
}

int dispatch(std::vector<std::string> args) {
  std::string level = "info";
  if (!take_log_level(args, &level)) throw boost::program_options::error("--log-level needs a value");
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off")
    throw boost::program_options::error("unknown --log-level '" + level + "'");
  spdlog::set_default_logger(spdlog::stderr_color_mt("ftcore"));
  spdlog::set_level(parsed);
  spdlog::set_pattern("%^%l%$: %v");

  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? ftcore::cli::kExitUsage : ftcore::cli::kExitOk;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "--version") return ftcore::cli::print_version();
  ftcore::init_runtime();
  // Commands that compute for long share the cores with other ftcore processes
  // (runtime.h); `run` joins in run_command, past the torchrun launcher's exec.
  if (command == "generate" || command == "quantize") ftcore::join_thread_sharing();
  if (command == "run") return ftcore::cli::run_command(rest);
  if (command == "validate") return ftcore::cli::validate_command(rest);
  if (command == "plugins") return ftcore::cli::plugins_command(rest);
  if (command == "plugin") return ftcore::cli::plugin_command(rest);
  if (command == "convert") return ftcore::cli::convert_command(rest);
  if (command == "generate") return ftcore::cli::generate_command(rest);
  if (command == "merge") return ftcore::cli::merge_command(rest);
  if (command == "quantize") return ftcore::cli::quantize_command(rest);
  if (command == "data") return ftcore::cli::data_command(rest);
  if (command == "ab") return ftcore::cli::ab_command(rest);
  std::string hint = ftcore::closest_match(command, {"run", "validate", "plugins", "plugin", "convert", "data", "generate", "merge", "quantize", "ab"});
  throw boost::program_options::error("unknown command '" + command + "'" +
                                      (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    return dispatch(std::move(args));
  } catch (const ftcore::ConfigError& e) {
    ftcore::cli::print_diagnostics(std::cerr, e.diagnostics());
    return ftcore::cli::kExitUsage;
  } catch (const boost::program_options::error& e) {
    std::cerr << "ftcore: " << e.what() << "\n(see ftcore --help)\n";
    return ftcore::cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "ftcore: error: " << e.what() << "\n";
    return ftcore::cli::kExitFailure;
  }
}

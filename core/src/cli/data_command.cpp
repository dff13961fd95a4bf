// `ftcore data inspect RECIPE [--rows N] [--set k=v]...`: the first rows of
// the recipe's dataset as the trainer will see them — token ids, the token
// text, and whether each token is a loss target or masked.
#include <iomanip>
#include <iostream>

#include <boost/program_options.hpp>

#include "command_line.h"
#include "commands.h"
#include "ftcore/dataset.h"
#include "session.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ftcore::cli {

namespace {

std::string printable(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out;
}

void print_example(const Example& e, const Tokenizer& tokenizer, int64_t index) {
  std::cout << "row " << index << " (source line " << e.source_line << "): " << e.input_ids.size() << " tokens, "
            << e.target_tokens() << " loss targets\n";
  for (size_t t = 0; t < e.input_ids.size(); ++t) {
    const bool target = e.labels[t] != kIgnoreLabel;
    std::cout << "  " << std::setw(5) << t << "  " << std::setw(7) << e.input_ids[t] << "  "
              << (target ? "target " : "masked ") << " '" << printable(tokenizer.decode({e.input_ids[t]})) << "'\n";
  }
}

}  // namespace

int data_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore data inspect RECIPE [options]\n\nShows the first rows of the recipe's dataset: token ids, "
      "text, and which tokens are loss targets.\n\nOptions");
  std::vector<std::string> positional_args, overrides, plugin_paths;
  int64_t rows = 3;
  visible.add_options()("rows", po::value(&rows), "rows to show (default 3)")(
      "set", po::value(&overrides)->composing(), "override a key: --set data.format=completion (repeatable)")(
      "plugin-path", po::value(&plugin_paths)->composing(), "extra plugin folder, searched first (repeatable)");
  if (!parse_subcommand(args, visible, positional_args)) return kExitOk;
  if (positional_args.size() != 2 || positional_args[0] != "inspect")
    throw po::error("expected `ftcore data inspect RECIPE`");

  auto loaded = load_and_validate(positional_args[1], overrides, plugin_paths);
  const Recipe& r = loaded->recipe;
  const fs::path tokenizer_dir =
      r.model.has_value("tokenizer_path") ? r.model.get_string("tokenizer_path") : r.model.get_string("path");
  auto tokenizer = Tokenizer::from_folder(tokenizer_dir);
  DataConfig config = DataConfig::from_options(r.data, r.model, r.train);
  PreparedData data = prepare_data(config, *tokenizer, tokenizer_dir / "tokenizer.json");
  int64_t targets = 0, tokens = 0;
  for (const auto& e : data.train) targets += e.target_tokens(), tokens += static_cast<int64_t>(e.input_ids.size());
  std::cout << config.path.string() << " (" << config.format << "): " << data.rows << " rows, " << data.train.size()
            << " train, " << data.validation.size() << " validation, " << data.skipped_rows << " skipped, "
            << data.truncated << " truncated to " << config.sequence_len << " tokens; " << tokens
            << " train tokens, " << targets << " loss targets" << (data.from_cache ? " (from cache)" : "") << "\n\n";
  for (int64_t i = 0; i < rows && i < static_cast<int64_t>(data.train.size()); ++i)
    print_example(data.train[static_cast<size_t>(i)], *tokenizer, i + 1);
  return kExitOk;
}

}  // namespace ftcore::cli

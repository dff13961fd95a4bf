// Subcommand argument parsing (see command_line.h).
#include "command_line.h"

#include <iostream>
#include <system_error>

namespace po = boost::program_options;

namespace ftcore::cli {

bool parse_subcommand(const std::vector<std::string>& args, po::options_description& visible,
                      std::vector<std::string>& positionals, int max_positionals) {
  visible.add_options()("help,h", "show this help");
  po::options_description all;
  all.add(visible).add_options()("positional-arguments", po::value(&positionals));
  po::positional_options_description positional;
  positional.add("positional-arguments", max_positionals);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << visible << "\n";
    return false;
  }
  return true;
}

bool parse_options(const std::vector<std::string>& args, const boost::program_options::options_description& visible,
                   boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  po::store(po::command_line_parser(args).options(visible).run(), vm);
  if (vm.count("help")) {
    std::cout << visible << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

namespace {

// `inner` relative to `outer` after resolving symlinks: "." when they are
// the same, a path without ".." when `inner` lies below `outer`.
std::filesystem::path relative_to(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  std::error_code ec;
  namespace fs = std::filesystem;
  return fs::weakly_canonical(fs::absolute(inner), ec).lexically_relative(fs::weakly_canonical(fs::absolute(outer), ec));
}

}  // namespace

void check_output_folder(const std::filesystem::path& out, const std::string& label, bool overwrite,
                         const std::vector<std::filesystem::path>& inputs) {
  namespace fs = std::filesystem;
  for (const fs::path& input : inputs) {
    const fs::path relative = relative_to(input, out);
    if (relative.empty() || *relative.begin() == "..") continue;
    throw po::error(label + ": " + out.string() + (relative == "." ? " is " : " holds ") + "the input " +
                    input.string() + "; writing there would delete it (even with --overwrite): choose another folder");
  }
  std::error_code ec;
  const bool empty_folder = fs::is_directory(out, ec) && fs::is_empty(out, ec);
  if (fs::exists(out, ec) && !empty_folder && !overwrite)
    throw po::error(label + ": " + out.string() + " exists and is not empty; pass --overwrite to replace it");
}

}  // namespace ftcore::cli

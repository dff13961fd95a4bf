// Subcommand argument parsing (see command_line.h).
#include "command_line.h"

#include <iostream>

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

}  // namespace ftcore::cli

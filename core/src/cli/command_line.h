// Parsing shared by every subcommand: its visible options (what --help
// prints; --help/-h is added here), plus positional arguments collected in
// order. Boost.Program_options errors propagate and become exit code 2.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace ftcore::cli {

// Returns false when --help was asked for (and has been printed).
bool parse_subcommand(const std::vector<std::string>& args, boost::program_options::options_description& visible,
                      std::vector<std::string>& positionals, int max_positionals = -1);

// For subcommands without positionals that read the variables_map
// themselves: stores and notifies; false when --help was printed.
bool parse_options(const std::vector<std::string>& args, const boost::program_options::options_description& visible,
                   boost::program_options::variables_map& vm);

}  // namespace ftcore::cli

// Parsing shared by every subcommand: its visible options (what --help
// prints; --help/-h is added here), plus positional arguments collected in
// order. Boost.Program_options errors propagate and become exit code 2.
#pragma once

#include <filesystem>
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

// What convert, merge and quantize check before writing an output folder
// (which replaces OUT whole): OUT that exists and is not an empty folder is
// refused without --overwrite, and OUT that is or holds one of `inputs` is
// refused even with it, since replacing OUT would delete them. `label` names
// the argument ("--out", "OUT_DIR"). Throws po::error (exit 2).
void check_output_folder(const std::filesystem::path& out, const std::string& label, bool overwrite,
                         const std::vector<std::filesystem::path>& inputs);

}  // namespace ftcore::cli

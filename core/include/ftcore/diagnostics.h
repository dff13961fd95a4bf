// Errors in user input, located: "recipe.toml:12:5: message". Validation
// collects every Diagnostic before failing, so a user fixes all at once.
// A ConfigError maps to exit code 2 in the CLI.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ftcore {

struct SourcePos {
  std::string file;  // a path, or "--set key=value" for command-line overrides
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;
};

struct Diagnostic {
  SourcePos where;
  std::string message;
  std::string str() const;  // "file:line:col: message"
};

class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(std::vector<Diagnostic> diagnostics);
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  std::vector<Diagnostic> diagnostics_;
};

// "did you mean" support: the candidate closest to `word` by edit distance,
// or "" when none is close enough to be a plausible typo.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

// "a, b, c"
std::string join(const std::vector<std::string>& items, const std::string& separator = ", ");

}  // namespace ftcore

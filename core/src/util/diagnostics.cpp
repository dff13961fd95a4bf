// Located diagnostics and "did you mean" suggestions.
#include "ftcore/diagnostics.h"

#include <algorithm>

namespace ftcore {

std::string Diagnostic::str() const {
  std::string out = where.file;
  // Appended piece by piece: g++ 12 warns (falsely, -Wstringop-overflow) on "literal" + std::string&&.
  if (where.line > 0 && where.file.rfind("--set", 0) != 0) {
    out += ':';
    out += std::to_string(where.line);
    out += ':';
    out += std::to_string(where.column);
  }
  out += ": ";
  out += message;
  return out;
}

namespace {
std::string summarize(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) {
    if (!out.empty()) out += '\n';
    out += d.str();
  }
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

ConfigError::ConfigError(std::vector<Diagnostic> diagnostics)
    : std::runtime_error(summarize(diagnostics)), diagnostics_(std::move(diagnostics)) {}

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

}  // namespace ftcore

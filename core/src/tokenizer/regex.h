// Regular expressions for pre-tokenizers and normalizers, through PCRE2
// (UTF + UCP, JIT-compiled), matching as HF tokenizers' Oniguruma does:
//   - `\s` / `\S` mean Unicode White_Space (Oniguruma's, which includes
//     U+0085; PCRE2's own `\s` does not), `\w` / `\W` Unicode word characters;
//   - successive matches follow rust-onig's `find_iter`: an empty match right
//     where the previous match ended is skipped, one character is stepped over.
// A Regex is immutable after construction and safe to use from many threads
// (match data and JIT stacks are per thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ftcore::tokenizer {

// A byte range of a searched string and whether the pattern matched it.
struct MatchSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool is_match = false;
};

class Regex {
 public:
  // `literal`: the pattern is a plain string (HF's `{"String": ...}` patterns).
  // Throws std::invalid_argument naming the pattern and PCRE2's message.
  explicit Regex(const std::string& pattern, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // The matches in `text` (valid UTF-8) as Oniguruma's find_iter yields them,
  // calling on_match(begin, end) for each.
  template <class OnMatch>
  void for_each_match(std::string_view text, OnMatch&& on_match) const {
    size_t last_end = 0;
    bool have_previous = false;
    size_t previous_end = 0;
    while (last_end <= text.size()) {
      size_t begin, end;
      if (!search(text, last_end, begin, end)) return;
      if (begin == end && have_previous && previous_end == end) {
        last_end += last_end < text.size() ? char_length_at(text, last_end) : 1;
        continue;
      }
      last_end = end;
      previous_end = end;
      have_previous = true;
      on_match(begin, end);
    }
  }

  // HF's Pattern::find_matches: the whole text as consecutive spans, matched
  // or not (one unmatched empty span for empty text).
  void find_matches(std::string_view text, std::vector<MatchSpan>& out) const;

  // Whether the pattern matches at exactly `pos` (anchored there).
  bool matches_at(std::string_view text, size_t pos) const;

 private:
  bool search(std::string_view text, size_t start, size_t& begin, size_t& end) const;
  static size_t char_length_at(std::string_view text, size_t pos);

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// Rewrites `\s \S \w \W` (outside character classes; `\s \S` inside them too)
// into the Unicode properties Oniguruma gives them.
std::string oniguruma_to_pcre2(const std::string& pattern);

}  // namespace ftcore::tokenizer

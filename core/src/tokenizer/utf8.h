// UTF-8 helpers for the tokenizer: walking code points, validating input,
// Rust's `String::from_utf8_lossy` (what HF decoders return for byte
// sequences that are not UTF-8), and the two whitespace definitions the
// pipeline needs (Unicode White_Space, as Rust's `char::is_whitespace` and
// regex `\s`; and Python's `str.strip`, used by chat templates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ftcore::tokenizer {

// Byte length of the UTF-8 sequence that starts with `lead` (1 for stray bytes).
inline size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

// Decodes the code point at `pos` of valid UTF-8 text and advances `pos`.
inline char32_t next_code_point(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  const size_t n = utf8_length(b0);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  pos += n;
  return cp;
}

inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The byte offset of the first invalid UTF-8 sequence, or nullopt when `s` is valid.
std::optional<size_t> find_invalid_utf8(std::string_view s);

// Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// Unicode White_Space (Rust's char::is_whitespace and regex `\s`).
bool is_unicode_whitespace(char32_t cp);
// Python's str.isspace (what str.strip and Jinja's `trim` remove).
bool is_python_whitespace(char32_t cp);
// Rust regex `\w`: Alphabetic, marks, decimal digits, connector punctuation, Join_Control.
bool is_word_char(char32_t cp);

// Python's str.strip() and str.rstrip() on UTF-8 text.
std::string python_strip(std::string_view s);
std::string python_rstrip(std::string_view s);

}  // namespace ftcore::tokenizer

// UTF-8 validation and lossy decoding by the well-formed byte sequences of
// Unicode's Table 3-7, so that a decoder's U+FFFD count equals Rust's.
#include "utf8.h"

#include "regex.h"

namespace ftcore::tokenizer {

namespace {

// The valid range of the second byte after `lead`, per Table 3-7 (later
// continuation bytes are always 80..BF). Returns the sequence length, 0 for
// a byte that cannot start a sequence.
size_t sequence_bounds(unsigned char lead, unsigned char& low, unsigned char& high) {
  low = 0x80;
  high = 0xBF;
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead == 0xE0) low = 0xA0;
  if (lead == 0xED) high = 0x9F;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead == 0xF0) low = 0x90;
  if (lead == 0xF4) high = 0x8F;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Length of the valid sequence at `pos`, or 0 with `consumed` set to the
// length of the maximal invalid subpart to replace.
size_t valid_sequence_at(std::string_view s, size_t pos, size_t& consumed) {
  const auto lead = static_cast<unsigned char>(s[pos]);
  unsigned char low, high;
  const size_t n = sequence_bounds(lead, low, high);
  if (n == 0) {
    consumed = 1;
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (pos + k >= s.size()) {
      consumed = k;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[pos + k]);
    const bool ok = k == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      consumed = k;
      return 0;
    }
  }
  return n;
}

}  // namespace

std::optional<size_t> find_invalid_utf8(std::string_view s) {
  size_t pos = 0, consumed = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = valid_sequence_at(s, pos, consumed);
    if (n == 0) return pos;
    pos += n;
  }
  return std::nullopt;
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0, consumed = 0;
  while (pos < bytes.size()) {
    const size_t n = valid_sequence_at(bytes, pos, consumed);
    if (n > 0) {
      out.append(bytes.data() + pos, n);
      pos += n;
    } else {
      out += "\xEF\xBF\xBD";
      pos += consumed;
    }
  }
  return out;
}

bool is_unicode_whitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_python_whitespace(char32_t cp) {
  return is_unicode_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F);
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  static const Regex word(R"(\w)");
  std::string one;
  append_utf8(one, cp);
  return word.matches_at(one, 0);
}

namespace {

// The [begin, end) of `s` without Python whitespace on the chosen sides.
std::string python_strip_sides(std::string_view s, bool left, bool right) {
  size_t begin = 0, end = s.size();
  while (left && begin < end) {
    size_t next = begin;
    if (!is_python_whitespace(next_code_point(s, next))) break;
    begin = next;
  }
  while (right && end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t probe = start;
    if (!is_python_whitespace(next_code_point(s, probe))) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

}  // namespace

std::string python_strip(std::string_view s) { return python_strip_sides(s, true, true); }
std::string python_rstrip(std::string_view s) { return python_strip_sides(s, false, true); }

}  // namespace ftcore::tokenizer

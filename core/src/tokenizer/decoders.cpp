// Decoder bodies, faithful to HF's edge cases: ByteLevel leaves a token with
// any character outside its alphabet as it is, an invalid byte run becomes
// one U+FFFD per byte under ByteFallback but per maximal subpart under
// ByteLevel (Rust's from_utf8_lossy).
#include "decoders.h"

#include "utf8.h"

namespace ftcore::tokenizer {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xNN>" token (Rust's u8::from_str_radix, which takes a leading '+').
int byte_token_value(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
  if (token[3] == '+') return hex_value(token[4]);
  const int hi = hex_value(token[3]), lo = hex_value(token[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

std::vector<char32_t> code_points(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t pos = 0; pos < s.size();) out.push_back(next_code_point(s, pos));
  return out;
}

}  // namespace

void ByteLevelDecoder::decode_chain(std::vector<std::string>& tokens) const {
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  std::string bytes;
  std::string token_bytes;
  for (const std::string& token : tokens) {
    token_bytes.clear();
    bool all_mapped = true;
    for (size_t pos = 0; pos < token.size() && all_mapped;) {
      const char32_t cp = next_code_point(token, pos);
      const int b = cp < alphabet.byte_of_char.size() ? alphabet.byte_of_char[cp] : -1;
      if (b < 0) all_mapped = false;
      else token_bytes += static_cast<char>(b);
    }
    bytes += all_mapped ? token_bytes : token;
  }
  tokens.assign(1, utf8_lossy(bytes));
}

void ByteFallbackDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string pending;  // consecutive byte tokens
  auto flush = [&] {
    if (pending.empty()) return;
    if (!find_invalid_utf8(pending))
      out.push_back(pending);
    else
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
    pending.clear();
  };
  for (std::string& token : tokens) {
    const int b = byte_token_value(token);
    if (b >= 0) {
      pending += static_cast<char>(b);
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  tokens.swap(out);
}

void FuseDecoder::decode_chain(std::vector<std::string>& tokens) const {
  std::string joined;
  for (const std::string& t : tokens) joined += t;
  tokens.assign(1, std::move(joined));
}

void StripDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (std::string& token : tokens) {
    const std::vector<char32_t> chars = code_points(token);
    size_t start_cut = 0;
    for (size_t i = 0; i < start_ && i < chars.size() && chars[i] == content_; ++i) start_cut = i + 1;
    size_t stop_cut = chars.size();
    for (size_t i = 0; i < stop_ && i < chars.size() && chars[chars.size() - i - 1] == content_; ++i)
      stop_cut = chars.size() - i - 1;
    std::string out;
    for (size_t i = start_cut; i < stop_cut; ++i) append_utf8(out, chars[i]);
    token.swap(out);
  }
}

void ReplaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  thread_local std::vector<MatchSpan> matches;
  for (std::string& token : tokens) {
    pattern_->find_matches(token, matches);
    std::string out;
    for (const MatchSpan& m : matches) {
      if (m.is_match) out += content_;
      else out.append(token, m.begin, m.end - m.begin);
    }
    token.swap(out);
  }
}

void MetaspaceDecoder::decode_chain(std::vector<std::string>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool drop = i == 0 && scheme_ != PrependScheme::Never;
    std::string out;
    std::string_view token = tokens[i];
    for (size_t pos = 0; pos < token.size();) {
      if (token.substr(pos).starts_with(replacement_)) {
        if (!drop) out += ' ';
        pos += replacement_.size();
      } else {
        out += token[pos++];
      }
    }
    tokens[i].swap(out);
  }
}

}  // namespace ftcore::tokenizer

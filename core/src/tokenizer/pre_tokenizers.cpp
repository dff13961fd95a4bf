// Pre-tokenizer bodies, each step in the order HF's applies it: ByteLevel
// puts the prefix space first, splits with the regex on the original
// characters, and only then maps every byte to its stand-in character.
#include "pre_tokenizers.h"

#include "utf8.h"

namespace ftcore::tokenizer {

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet alphabet = [] {
    ByteLevelAlphabet a;
    a.byte_of_char.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    char32_t next_stand_in = 256;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = printable(b) ? static_cast<char32_t>(b) : next_stand_in++;
      append_utf8(a.utf8_of_byte[b], cp);
      a.byte_of_char[cp] = static_cast<int16_t>(b);
    }
    return a;
  }();
  return alphabet;
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
    : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {
  static const std::shared_ptr<const Regex> gpt2 = std::make_shared<const Regex>(kGpt2Pattern);
  if (use_regex_) gpt2_ = gpt2;
}

void ByteLevelPreTokenizer::pre_tokenize(Pieces& pieces) const {
  const ByteLevelAlphabet& alphabet = byte_level_alphabet();
  thread_local std::string text, scratch;
  thread_local std::vector<Piece> out;
  text.clear();
  out.clear();
  auto append_mapped = [&](std::string_view source, uint32_t begin, uint32_t end, uint32_t origin_prefix) {
    if (begin == end) return;
    const auto start = static_cast<uint32_t>(text.size());
    uint32_t prefix = 0;
    for (uint32_t i = begin; i < end; ++i) {
      const std::string& mapped = alphabet.utf8_of_byte[static_cast<unsigned char>(source[i])];
      text += mapped;
      if (i < origin_prefix) prefix += static_cast<uint32_t>(mapped.size());
    }
    out.push_back({start, static_cast<uint32_t>(text.size()), -1, prefix});
  };
  for (const Piece& p : pieces.list) {
    if (p.is_added()) {
      out.push_back({static_cast<uint32_t>(text.size()), 0, p.added_id, 0});
      text.append(pieces.view(p));
      out.back().end = static_cast<uint32_t>(text.size());
      continue;
    }
    std::string_view view = pieces.view(p);
    uint32_t origin_prefix = p.origin_prefix;
    if (add_prefix_space_ && !view.empty() && view[0] != ' ') {
      scratch.assign(1, ' ');
      scratch.append(view);
      view = scratch;
      if (origin_prefix > 0) ++origin_prefix;
    }
    if (!use_regex_) {
      append_mapped(view, 0, static_cast<uint32_t>(view.size()), origin_prefix);
      continue;
    }
    // Isolated: matches and the text between them are all pieces.
    uint32_t previous = 0;
    gpt2_->for_each_match(view, [&](size_t begin, size_t end) {
      append_mapped(view, previous, static_cast<uint32_t>(begin), origin_prefix);
      append_mapped(view, static_cast<uint32_t>(begin), static_cast<uint32_t>(end), origin_prefix);
      previous = static_cast<uint32_t>(end);
    });
    append_mapped(view, previous, static_cast<uint32_t>(view.size()), origin_prefix);
  }
  pieces.text.swap(text);
  pieces.list.swap(out);
}

void SplitPreTokenizer::pre_tokenize(Pieces& pieces) const {
  thread_local std::vector<MatchSpan> matches;
  split_text_pieces(pieces, [&](std::string_view view, std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    pattern_->find_matches(view, matches);
    if (invert_)
      for (MatchSpan& m : matches) m.is_match = !m.is_match;
    apply_split_behavior(matches, behavior_, ranges);
  });
}

DigitsPreTokenizer::DigitsPreTokenizer(bool individual_digits)
    : individual_digits_(individual_digits),
      numbers_(std::make_unique<Regex>(individual_digits ? R"(\p{N})" : R"(\p{N}+)")) {}

void DigitsPreTokenizer::pre_tokenize(Pieces& pieces) const {
  // Rust's char::is_numeric is \p{N}; HF's per-character matches merged
  // Contiguous are exactly the runs `\p{N}+` finds, isolated.
  split_text_pieces(pieces, [&](std::string_view view, std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    uint32_t previous = 0;
    numbers_->for_each_match(view, [&](size_t begin, size_t end) {
      ranges.emplace_back(previous, static_cast<uint32_t>(begin));
      ranges.emplace_back(static_cast<uint32_t>(begin), static_cast<uint32_t>(end));
      previous = static_cast<uint32_t>(end);
    });
    ranges.emplace_back(previous, static_cast<uint32_t>(view.size()));
  });
}

void MetaspacePreTokenizer::pre_tokenize(Pieces& pieces) const {
  const auto grown = static_cast<uint32_t>(replacement_.size());
  rewrite_text_pieces(pieces, [&](std::string_view view, uint32_t origin_prefix, std::string& out) -> uint32_t {
    const size_t start = out.size();
    uint32_t prefix = 0;
    for (uint32_t i = 0; i < view.size(); ++i) {
      const bool space = view[i] == ' ';
      if (space)
        out += replacement_;
      else
        out += view[i];
      if (i < origin_prefix) prefix += space ? grown : 1;
    }
    const bool starts_with_replacement = std::string_view(out).substr(start).starts_with(replacement_);
    const bool prepend = out.size() > start && !starts_with_replacement &&
                         (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && origin_prefix > 0));
    if (prepend) {
      out.insert(start, replacement_);
      if (prefix > 0) prefix += grown;
    }
    return prefix;
  });
  if (!split_) return;
  thread_local std::vector<MatchSpan> matches;
  split_text_pieces(pieces, [&](std::string_view view, std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
    // Each replacement character is its own match (HF splits on a char).
    matches.clear();
    uint32_t previous = 0;
    for (size_t at = view.find(replacement_); at != std::string_view::npos; at = view.find(replacement_, at + grown)) {
      if (previous != at) matches.push_back({previous, static_cast<uint32_t>(at), false});
      matches.push_back({static_cast<uint32_t>(at), static_cast<uint32_t>(at) + grown, true});
      previous = static_cast<uint32_t>(at) + grown;
    }
    if (previous != view.size()) matches.push_back({previous, static_cast<uint32_t>(view.size()), false});
    apply_split_behavior(matches, SplitBehavior::MergedWithNext, ranges);
  });
}

}  // namespace ftcore::tokenizer

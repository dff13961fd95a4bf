// The text on its way through the pipeline (HF tokenizers' PreTokenizedString):
// consecutive pieces of one buffer, each either an added token already
// resolved to its id or text still to normalize, pre-tokenize and tokenize.
//
// HF tracks, for every normalized byte, the span of the original text it came
// from. One fact of that alignment changes token ids: whether a piece starts
// at offset 0 of the input (Metaspace's prepend_scheme "first"). Bytes aligned
// to offset 0 always form a prefix of the first piece, so a piece carries only
// the length of that prefix (`origin_prefix`), and every stage that splits or
// rewrites text keeps it as HF's alignments would.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "regex.h"
#include "utf8.h"

namespace ftcore::tokenizer {

struct Piece {
  uint32_t begin = 0;
  uint32_t end = 0;
  int32_t added_id = -1;       // >= 0: an added token; later stages leave it alone
  uint32_t origin_prefix = 0;  // leading bytes aligned to offset 0 of the input
  bool is_added() const { return added_id >= 0; }
};

struct Pieces {
  std::string text;
  std::vector<Piece> list;
  std::string_view view(const Piece& p) const { return std::string_view(text).substr(p.begin, p.end - p.begin); }
};

// HF's SplitDelimiterBehavior.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// The byte ranges kept when `matches` (covering a whole text, as
// Regex::find_matches gives them) are split with `behavior`. Empty ranges
// are dropped, as PreTokenizedString::split drops empty splits.
void apply_split_behavior(const std::vector<MatchSpan>& matches, SplitBehavior behavior,
                          std::vector<std::pair<uint32_t, uint32_t>>& kept);

// Replaces each text piece by the sub-ranges `ranges_of(view, ranges)` fills
// (relative to the piece); the buffer is unchanged.
template <class RangesOf>
void split_text_pieces(Pieces& pieces, RangesOf&& ranges_of) {
  thread_local std::vector<Piece> out;
  thread_local std::vector<std::pair<uint32_t, uint32_t>> ranges;
  out.clear();
  for (const Piece& p : pieces.list) {
    if (p.is_added()) {
      out.push_back(p);
      continue;
    }
    ranges.clear();
    ranges_of(pieces.view(p), ranges);
    for (const auto& [b, e] : ranges) {
      if (b == e) continue;
      const uint32_t prefix = b < p.origin_prefix ? std::min(e, p.origin_prefix) - b : 0;
      out.push_back({p.begin + b, p.begin + e, -1, prefix});
    }
  }
  pieces.list.swap(out);
}

// Rewrites each text piece: `rewrite(view, origin_prefix, out)` appends the
// new text to `out` and returns its origin prefix. Empty results are dropped.
template <class Rewrite>
void rewrite_text_pieces(Pieces& pieces, Rewrite&& rewrite) {
  thread_local std::string text;
  thread_local std::vector<Piece> out;
  text.clear();
  out.clear();
  for (const Piece& p : pieces.list) {
    const auto begin = static_cast<uint32_t>(text.size());
    uint32_t prefix = 0;
    if (p.is_added())
      text.append(pieces.view(p));
    else
      prefix = rewrite(pieces.view(p), p.origin_prefix, text);
    const auto end = static_cast<uint32_t>(text.size());
    if (begin != end || p.is_added()) out.push_back({begin, end, p.added_id, prefix});
  }
  pieces.text.swap(text);
  pieces.list.swap(out);
}

// The length `prefix` bytes of `text` take once every character is mapped by
// `mapped_length(first_byte, char_length)`.
template <class MappedLength>
uint32_t mapped_prefix(std::string_view text, uint32_t prefix, MappedLength&& mapped_length) {
  uint32_t out = 0;
  for (uint32_t i = 0; i < prefix && i < text.size();) {
    const uint32_t n = static_cast<uint32_t>(utf8_length(static_cast<unsigned char>(text[i])));
    out += mapped_length(text.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace ftcore::tokenizer

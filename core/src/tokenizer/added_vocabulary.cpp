// Added-token bookkeeping and matching, following HF's AddedVocabulary:
// ids as add_tokens assigns them, then find_matches' rules (a rejected
// single_word match does not rewind the search; lstrip never reaches back
// past the previous match).
#include "added_vocabulary.h"

#include <algorithm>

#include "utf8.h"

namespace ftcore::tokenizer {

namespace {

// Start of the whitespace run that ends `text` (Rust regex `\s*$`).
size_t trailing_whitespace_start(std::string_view text) {
  size_t start = text.size();
  while (start > 0) {
    size_t lead = start - 1;
    while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
    size_t probe = lead;
    if (!is_unicode_whitespace(next_code_point(text, probe))) break;
    start = lead;
  }
  return start;
}

// Length of the whitespace run that starts `text` (Rust regex `^\s*`).
size_t leading_whitespace_length(std::string_view text) {
  size_t end = 0;
  while (end < text.size()) {
    size_t probe = end;
    if (!is_unicode_whitespace(next_code_point(text, probe))) break;
    end = probe;
  }
  return end;
}

bool word_char_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t lead = pos - 1;
  while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xC0) == 0x80) --lead;
  return is_word_char(next_code_point(text, lead));
}

bool word_char_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return false;
  return is_word_char(next_code_point(text, pos));
}

}  // namespace

void AddedVocabulary::Matcher::build(const std::vector<std::pair<std::string, int32_t>>& patterns) {
  nodes_.assign(1, Node{});
  first_byte_.fill(false);
  for (const auto& [pattern, id] : patterns) {
    int32_t node = 0;
    for (unsigned char b : pattern) {
      auto& children = nodes_[static_cast<size_t>(node)].children;
      auto it = std::find_if(children.begin(), children.end(), [b](const auto& c) { return c.first == b; });
      if (it != children.end()) {
        node = it->second;
      } else {
        const auto child = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].children.emplace_back(b, child);
        nodes_.emplace_back();
        node = child;
      }
    }
    nodes_[static_cast<size_t>(node)].id = id;
    if (!pattern.empty()) first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  }
}

bool AddedVocabulary::Matcher::find(std::string_view text, size_t from, size_t& begin, size_t& end,
                                    int32_t& id) const {
  if (empty()) return false;
  for (size_t i = from; i < text.size(); ++i) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    int32_t node = 0;
    size_t best_end = 0;
    int32_t best_id = -1;
    for (size_t j = i; j < text.size(); ++j) {
      const auto& children = nodes_[static_cast<size_t>(node)].children;
      const auto b = static_cast<unsigned char>(text[j]);
      auto it = std::find_if(children.begin(), children.end(), [b](const auto& c) { return c.first == b; });
      if (it == children.end()) break;
      node = it->second;
      if (nodes_[static_cast<size_t>(node)].id >= 0) {
        best_end = j + 1;
        best_id = nodes_[static_cast<size_t>(node)].id;
      }
    }
    if (best_id >= 0) {
      begin = i;
      end = best_end;
      id = best_id;
      return true;
    }
  }
  return false;
}

void AddedVocabulary::add(const std::vector<AddedToken>& tokens, const BpeModel& model,
                          const Normalizer* normalizer) {
  const int64_t model_size = model.size();
  int64_t next_id = model_size;
  if (!by_id_.empty()) {
    int64_t max_id = 0;
    for (const auto& entry : by_id_) max_id = std::max<int64_t>(max_id, entry.first);
    next_id = (max_id >= model_size || model_size == 0) ? max_id + 1 : model_size;
  }
  for (const AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    int32_t id;
    if (auto known = token_to_id(token.content)) id = *known;
    else if (auto in_model = model.token_to_id(token.content)) id = *in_model;
    else id = static_cast<int32_t>(next_id++);

    Entry entry{token, token.content};
    if (token.normalized && normalizer) {
      uint32_t origin_prefix = 0;
      normalizer->normalize(entry.decode_form, origin_prefix);
    }
    by_content_[token.content] = id;
    if (token.special) special_.insert(token.content);
    by_id_[id] = std::move(entry);
  }
  rebuild_matchers();
}

void AddedVocabulary::rebuild_matchers() {
  std::vector<std::pair<std::string, int32_t>> raw, normalized;
  for (const auto& [id, entry] : by_id_)
    (entry.token.normalized ? normalized : raw).emplace_back(entry.token.normalized ? entry.decode_form : entry.token.content, id);
  raw_matcher_.build(raw);
  normalized_matcher_.build(normalized);
}

void AddedVocabulary::find_all(std::string_view text, const Matcher& matcher, std::vector<Found>& out) const {
  out.clear();
  size_t start_offset = 0, from = 0, begin, end;
  int32_t id;
  while (matcher.find(text, from, begin, end, id)) {
    from = end;
    const AddedToken& token = by_id_.at(id).token;
    if (token.single_word && (word_char_before(text, begin) || word_char_at(text, end))) continue;
    size_t start = begin, stop = end;
    if (token.lstrip) start = std::max(trailing_whitespace_start(text.substr(0, begin)), start_offset);
    if (token.rstrip) stop += leading_whitespace_length(text.substr(end));
    if (start_offset < start) out.push_back({-1, static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start)});
    out.push_back({id, static_cast<uint32_t>(start), static_cast<uint32_t>(stop)});
    start_offset = stop;
  }
  if (start_offset != text.size())
    out.push_back({-1, static_cast<uint32_t>(start_offset), static_cast<uint32_t>(text.size())});
}

void AddedVocabulary::split_raw(Pieces& pieces) const {
  if (raw_matcher_.empty()) return;
  thread_local std::vector<Found> found;
  thread_local std::vector<Piece> out;
  out.clear();
  for (const Piece& p : pieces.list) {
    if (p.is_added()) {
      out.push_back(p);
      continue;
    }
    find_all(pieces.view(p), raw_matcher_, found);
    for (const Found& f : found) {
      if (f.begin == f.end) continue;
      const uint32_t prefix = f.begin < p.origin_prefix ? std::min(f.end, p.origin_prefix) - f.begin : 0;
      out.push_back({p.begin + f.begin, p.begin + f.end, f.id, f.id >= 0 ? 0 : prefix});
    }
  }
  pieces.list.swap(out);
}

void AddedVocabulary::normalize_and_split(Pieces& pieces, const Normalizer* normalizer) const {
  if (!normalizer && normalized_matcher_.empty()) return;
  thread_local std::string text, normalized;
  thread_local std::vector<Piece> out;
  thread_local std::vector<Found> found;
  text.clear();
  out.clear();
  for (const Piece& p : pieces.list) {
    const auto base = static_cast<uint32_t>(text.size());
    if (p.is_added()) {
      text.append(pieces.view(p));
      out.push_back({base, static_cast<uint32_t>(text.size()), p.added_id, 0});
      continue;
    }
    normalized.assign(pieces.view(p));
    uint32_t origin_prefix = p.origin_prefix;
    if (normalizer) normalizer->normalize(normalized, origin_prefix);
    text += normalized;
    if (normalized_matcher_.empty()) {
      if (!normalized.empty()) out.push_back({base, static_cast<uint32_t>(text.size()), -1, origin_prefix});
      continue;
    }
    find_all(normalized, normalized_matcher_, found);
    for (const Found& f : found) {
      if (f.begin == f.end) continue;
      const uint32_t prefix = f.begin < origin_prefix ? std::min(f.end, origin_prefix) - f.begin : 0;
      out.push_back({base + f.begin, base + f.end, f.id, f.id >= 0 ? 0 : prefix});
    }
  }
  pieces.text.swap(text);
  pieces.list.swap(out);
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const std::string* AddedVocabulary::decode_form(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second.decode_form;
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second.token;
}

int64_t AddedVocabulary::count_beyond(const BpeModel& model) const {
  int64_t n = 0;
  for (const auto& entry : by_content_) n += model.token_to_id(entry.first) ? 0 : 1;
  return n;
}

}  // namespace ftcore::tokenizer

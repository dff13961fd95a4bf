// BPE model body: building the merge table, splitting a word into initial
// symbols (with byte fallback and unk fusing exactly as HF's merge_word,
// quirks included), the merge loop, and the per-thread word cache.
#include "bpe_model.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "utf8.h"

namespace ftcore::tokenizer {

namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};
constexpr size_t kMaxCachedWordBytes = 256;  // HF's MAX_LENGTH
constexpr size_t kCacheCapacity = 1 << 16;   // words per thread and model; HF keeps 10,000

// Words already tokenized, their ids stored end to end in one arena.
struct WordCache {
  StringMap<std::pair<uint32_t, uint32_t>> spans;  // word -> (offset, count) in ids
  std::vector<int32_t> ids;
};

}  // namespace

std::atomic<uint64_t> BpeModel::next_cache_owner_{1};

void BpeModel::PairMap::reserve(size_t n) {
  size_t capacity = 16;
  while (capacity < 2 * n) capacity <<= 1;
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, {});
  mask_ = capacity - 1;
}

void BpeModel::PairMap::insert_or_assign(uint64_t key, MergeTarget value) {
  for (size_t i = (key * 0x9E3779B97F4A7C15ULL) >> 20 & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == kEmpty || keys_[i] == key) {
      keys_[i] = key;
      values_[i] = value;
      return;
    }
  }
}

const BpeModel::MergeTarget* BpeModel::PairMap::find(uint64_t key) const {
  for (size_t i = (key * 0x9E3779B97F4A7C15ULL) >> 20 & mask_;; i = (i + 1) & mask_) {
    if (keys_[i] == key) return &values_[i];
    if (keys_[i] == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel(StringMap<int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)), cache_owner_(next_cache_owner_++) {
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) {
    if (id < 0) throw std::invalid_argument("vocabulary id " + std::to_string(id) + " of '" + token + "' is negative");
    max_id = std::max(max_id, id);
  }
  if (max_id >= 64 * static_cast<int64_t>(vocab_.size()) + (1 << 20))
    throw std::invalid_argument("vocabulary ids are too sparse (largest " + std::to_string(max_id) + " for " +
                                std::to_string(vocab_.size()) + " tokens)");
  tokens_by_id_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& entry : vocab_) tokens_by_id_[static_cast<size_t>(entry.second)] = &entry.first;

  merges_.reserve(merges.size());
  const std::string& prefix = options_.continuing_subword_prefix;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto id_of = [&](const std::string& token) {
      auto it = vocab_.find(token);
      if (it == vocab_.end())
        throw std::invalid_argument("merge " + std::to_string(rank + 1) + " ('" + a + "', '" + b + "'): '" + token +
                                    "' is not in the vocabulary");
      return it->second;
    };
    const int32_t a_id = id_of(a), b_id = id_of(b);
    const std::string merged = a + (b.starts_with(prefix) ? b.substr(prefix.size()) : b);
    merges_.insert_or_assign(pair_key(a_id, b_id), {static_cast<uint32_t>(rank), id_of(merged)});
  }

  small_char_ids_.assign(0x200, -1);
  const bool plain_chars = prefix.empty() && options_.end_of_word_suffix.empty();
  for (char32_t cp = 0; plain_chars && cp < 0x200; ++cp) {
    std::string s;
    append_utf8(s, cp);
    if (auto it = vocab_.find(s); it != vocab_.end()) small_char_ids_[cp] = it->second;
  }
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const std::string name = std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">";
    auto it = vocab_.find(name);
    byte_token_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_by_id_.size()) return nullptr;
  return tokens_by_id_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (word.size() >= kMaxCachedWordBytes) {
    merge_word(word, out);
    return;
  }
  // One cache per (thread, model); a few models per thread, the oldest evicted.
  struct Slot {
    uint64_t owner = 0;
    std::unique_ptr<WordCache> cache;
  };
  thread_local std::array<Slot, 4> slots;
  thread_local size_t next_evicted = 0;
  WordCache* cache = nullptr;
  for (Slot& slot : slots)
    if (slot.owner == cache_owner_) cache = slot.cache.get();
  if (!cache) {
    Slot& slot = slots[next_evicted++ % slots.size()];
    slot.owner = cache_owner_;
    slot.cache = std::make_unique<WordCache>();
    cache = slot.cache.get();
  }
  if (auto it = cache->spans.find(word); it != cache->spans.end()) {
    const auto [offset, count] = it->second;
    out.insert(out.end(), cache->ids.begin() + offset, cache->ids.begin() + offset + count);
    return;
  }
  const size_t start = out.size();
  merge_word(word, out);
  if (cache->spans.size() < kCacheCapacity) {
    const auto offset = static_cast<uint32_t>(cache->ids.size());
    cache->ids.insert(cache->ids.end(), out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
    cache->spans.emplace(std::string(word), std::make_pair(offset, static_cast<uint32_t>(out.size() - start)));
  }
}

std::optional<int32_t> BpeModel::char_id(std::string_view word, size_t begin, size_t end) const {
  const bool first = begin == 0, last = end == word.size();
  const std::string& prefix = options_.continuing_subword_prefix;
  const std::string& suffix = options_.end_of_word_suffix;
  if (prefix.empty() && suffix.empty()) {
    size_t pos = begin;
    const char32_t cp = next_code_point(word, pos);
    if (cp < small_char_ids_.size()) {
      const int32_t id = small_char_ids_[cp];
      return id < 0 ? std::nullopt : std::optional<int32_t>(id);
    }
    return token_to_id(word.substr(begin, end - begin));
  }
  std::string s = (!first ? prefix : std::string()) + std::string(word.substr(begin, end - begin)) + (last ? suffix : "");
  return token_to_id(s);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, true});
  };

  std::optional<int32_t> unk;  // a pending unk symbol, flushed before the next known character
  for (size_t pos = 0; pos < word.size();) {
    const size_t end = pos + utf8_length(static_cast<unsigned char>(word[pos]));
    if (auto id = char_id(word, pos, end)) {
      if (unk) add(*unk);
      unk.reset();
      add(*id);
    } else {
      bool fell_back = false;
      if (options_.byte_fallback) {
        // The character's bytes (with any prefix or suffix HF adds) as <0xNN> tokens, if all exist.
        const bool first = pos == 0, last = end == word.size();
        const std::string s = (!first ? options_.continuing_subword_prefix : std::string()) +
                              std::string(word.substr(pos, end - pos)) + (last ? options_.end_of_word_suffix : "");
        fell_back = true;
        for (unsigned char b : s) fell_back &= byte_token_ids_[b] >= 0;
        if (fell_back)
          for (unsigned char b : s) add(byte_token_ids_[b]);  // a pending unk stays pending, as in HF
      }
      if (!fell_back && options_.unk_token) {
        auto unk_id = token_to_id(*options_.unk_token);
        if (!unk_id) throw std::invalid_argument("unk_token '" + *options_.unk_token + "' is not in the vocabulary");
        if (unk && !options_.fuse_unk) add(*unk);
        if (!unk || !options_.fuse_unk) unk = *unk_id;
      }
      // Without byte fallback and unk token, HF drops the character.
    }
    pos = end;
  }
  if (unk) add(*unk);

  struct Merge {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }  // min-heap
  };
  thread_local std::vector<Merge> queue;  // a binary heap, smallest (rank, pos) on top
  queue.clear();
  auto push = [&](Merge m) {
    queue.push_back(m);
    std::push_heap(queue.begin(), queue.end());
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const MergeTarget* m = merges_.find(pair_key(symbols[i].id, symbols[i + 1].id)))
      push({m->rank, static_cast<int32_t>(i), m->new_id});

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    const Merge top = queue.back();
    queue.pop_back();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // A stale entry: the pair at this position changed since it was queued.
    const MergeTarget* current = merges_.find(pair_key(left.id, right.id));
    if (!current || current->new_id != top.new_id) continue;
    left.id = top.new_id;
    left.next = right.next;
    right.alive = false;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0)
      if (const MergeTarget* m = merges_.find(pair_key(symbols[static_cast<size_t>(left.prev)].id, left.id)))
        push({m->rank, left.prev, m->new_id});
    if (left.next >= 0)
      if (const MergeTarget* m = merges_.find(pair_key(left.id, symbols[static_cast<size_t>(left.next)].id)))
        push({m->rank, top.pos, m->new_id});
  }
  for (const Symbol& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace ftcore::tokenizer

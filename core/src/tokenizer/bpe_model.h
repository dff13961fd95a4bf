// The BPE model (HF tokenizers' `model` of type "BPE"): a word becomes its
// characters (or, with byte_fallback, <0xNN> byte tokens; otherwise the unk
// token, fused when fuse_unk), then the lowest-ranked merge among adjacent
// pairs is applied again and again, leftmost first on equal rank, through a
// priority queue over a linked list of symbols (Sennrich et al. 2016,
// https://arxiv.org/abs/1508.07909; the order is HF's Word::merge_all).
// Results for words under 256 bytes are cached per thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ftcore::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

struct BpeOptions {
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;  // "" when none
  std::string end_of_word_suffix;         // "" when none
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // Throws std::invalid_argument naming a merge whose parts or result are not
  // in the vocabulary (as HF refuses them).
  BpeModel(StringMap<int32_t> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions options);

  // Appends the ids of `word` to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when no token has this id.
  const std::string* id_to_token(int32_t id) const;
  // Number of vocabulary entries (HF's get_vocab_size).
  int64_t size() const { return static_cast<int64_t>(vocab_.size()); }

 private:
  struct MergeTarget {
    uint32_t rank;
    int32_t new_id;
  };
  // Open-addressing map from a pair of ids to its merge: the hot lookup.
  class PairMap {
   public:
    void reserve(size_t n);
    void insert_or_assign(uint64_t key, MergeTarget value);
    const MergeTarget* find(uint64_t key) const;

   private:
    std::vector<uint64_t> keys_;  // kEmpty marks a free slot
    std::vector<MergeTarget> values_;
    size_t mask_ = 0;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  std::optional<int32_t> char_id(std::string_view word, size_t begin, size_t end) const;

  StringMap<int32_t> vocab_;
  std::vector<const std::string*> tokens_by_id_;  // into vocab_'s keys
  PairMap merges_;
  BpeOptions options_;
  std::vector<int32_t> small_char_ids_;  // ids of characters below U+0200, -1 when absent
  std::array<int32_t, 256> byte_token_ids_{};  // ids of <0xNN>, -1 when absent
  uint64_t cache_owner_ = 0;                    // this model's key into the per-thread caches
  static std::atomic<uint64_t> next_cache_owner_;
};

}  // namespace ftcore::tokenizer

// Added tokens (tokenizer.json's `added_tokens`, special or not): matched
// whole in the text before pre-tokenization, leftmost first and longest at a
// position, as HF's AddedVocabulary does with its Aho-Corasick automata:
//   - tokens with normalized=false are found in the raw input; the text
//     between them is normalized, then tokens with normalized=true are found
//     in that normalized text (matching their own normalized form);
//   - single_word: only where no word character touches either side;
//   - lstrip / rstrip: the match swallows the whitespace on that side.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "bpe_model.h"
#include "normalizers.h"
#include "pieces.h"

namespace ftcore::tokenizer {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

class AddedVocabulary {
 public:
  // HF's add_tokens at load time: a token takes its id from the model's
  // vocabulary when there, else the next id after the model's.
  void add(const std::vector<AddedToken>& tokens, const BpeModel& model, const Normalizer* normalizer);

  // Splits the input (one piece) around the non-normalized added tokens.
  void split_raw(Pieces& pieces) const;
  // Normalizes each text piece, then splits it around the normalized added tokens.
  void normalize_and_split(Pieces& pieces, const Normalizer* normalizer) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  // The string decoders see for an added token: its normalized form when
  // normalization changed it (HF 0.23), else its content; nullptr if not added.
  const std::string* decode_form(int32_t id) const;
  bool is_special_content(std::string_view token) const { return special_.count(std::string(token)) > 0; }
  const AddedToken* find(int32_t id) const;
  // Added tokens whose content is not in the model's vocabulary.
  int64_t count_beyond(const BpeModel& model) const;
  bool empty() const { return by_content_.empty(); }

 private:
  struct Entry {
    AddedToken token;
    std::string decode_form;
  };
  // Leftmost-longest matching of a set of strings (a byte trie).
  class Matcher {
   public:
    void build(const std::vector<std::pair<std::string, int32_t>>& patterns);
    bool empty() const { return nodes_.size() <= 1; }
    // The leftmost, then longest, match starting at or after `from`.
    bool find(std::string_view text, size_t from, size_t& begin, size_t& end, int32_t& id) const;

   private:
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;
      int32_t id = -1;
    };
    std::vector<Node> nodes_;
    std::array<bool, 256> first_byte_{};
  };
  struct Found {
    int32_t id;  // -1: text
    uint32_t begin, end;
  };
  void find_all(std::string_view text, const Matcher& matcher, std::vector<Found>& out) const;
  void rebuild_matchers();

  std::unordered_map<std::string, int32_t> by_content_;
  std::unordered_map<int32_t, Entry> by_id_;
  std::unordered_set<std::string> special_;
  Matcher raw_matcher_, normalized_matcher_;
};

}  // namespace ftcore::tokenizer

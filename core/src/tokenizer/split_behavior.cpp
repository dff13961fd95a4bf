// NormalizedString::split's delimiter behaviors, with HF's exact folds:
// e.g. MergedWithPrevious glues a match onto the preceding piece only when
// that piece was not itself a match, so "a--b" on '-' gives "a-", "-", "b".
#include "pieces.h"

#include <algorithm>

namespace ftcore::tokenizer {

void apply_split_behavior(const std::vector<MatchSpan>& matches, SplitBehavior behavior,
                          std::vector<std::pair<uint32_t, uint32_t>>& kept) {
  kept.clear();
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const MatchSpan& m : matches) kept.emplace_back(m.begin, m.end);
      break;
    case SplitBehavior::Removed:
      for (const MatchSpan& m : matches)
        if (!m.is_match) kept.emplace_back(m.begin, m.end);
      break;
    case SplitBehavior::Contiguous: {
      bool previous_match = false;
      for (const MatchSpan& m : matches) {
        if (m.is_match == previous_match && !kept.empty())
          kept.back().second = m.end;
        else
          kept.emplace_back(m.begin, m.end);
        previous_match = m.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const MatchSpan& m : matches) {
        if (m.is_match && !previous_match && !kept.empty())
          kept.back().second = m.end;
        else
          kept.emplace_back(m.begin, m.end);
        previous_match = m.is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      bool previous_match = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty())
          kept.back().first = it->begin;
        else
          kept.emplace_back(it->begin, it->end);
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  std::erase_if(kept, [](const auto& r) { return r.first == r.second; });
}

}  // namespace ftcore::tokenizer

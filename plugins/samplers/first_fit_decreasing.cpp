// The max-tree behind first_fit_decreasing.h, and the packing loop.
#include "first_fit_decreasing.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace ftcore::plugins::samplers {
namespace {

// Room left in each of `rows` rows (all start at `capacity`) as a complete
// binary tree whose inner nodes hold the maximum room below them: the
// leftmost row with room >= need is one walk from the root.
class RoomTree {
 public:
  RoomTree(size_t rows, int64_t capacity) {
    while (leaves_ < rows) leaves_ *= 2;
    room_.assign(2 * leaves_, capacity);
  }

  // Callers guarantee some row has room (an unopened row always does).
  size_t first_row_with_room(int64_t need) const {
    size_t node = 1;
    while (node < leaves_) node = room_[2 * node] >= need ? 2 * node : 2 * node + 1;
    return node - leaves_;
  }

  void take(size_t row, int64_t tokens) {
    size_t node = row + leaves_;
    room_[node] -= tokens;
    for (node /= 2; node >= 1; node /= 2) room_[node] = std::max(room_[2 * node], room_[2 * node + 1]);
  }

 private:
  size_t leaves_ = 1;
  std::vector<int64_t> room_;  // room_[1] is the root; leaves at [leaves_, 2 leaves_)
};

}  // namespace

std::vector<std::vector<int64_t>> pack_first_fit_decreasing(const std::vector<int64_t>& lengths, int64_t capacity) {
  std::vector<int64_t> longest_first(lengths.size());
  std::iota(longest_first.begin(), longest_first.end(), int64_t{0});
  std::stable_sort(longest_first.begin(), longest_first.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });

  // n examples never need more than n rows, so n leaves are enough.
  RoomTree rooms(lengths.size(), capacity);
  std::vector<std::vector<int64_t>> rows;
  for (int64_t example : longest_first) {
    const int64_t length = lengths[example];
    if (length < 0 || length > capacity)
      throw std::invalid_argument("example " + std::to_string(example) + " of length " + std::to_string(length) +
                                  " does not fit a row of " + std::to_string(capacity) + " tokens");
    const size_t row = rooms.first_row_with_room(length);
    if (row == rows.size()) rows.emplace_back();  // rows open left to right, so this is the next one
    rows[row].push_back(example);
    rooms.take(row, length);
  }
  return rows;
}

}  // namespace ftcore::plugins::samplers

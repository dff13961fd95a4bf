// First-fit-decreasing bin packing, the packing of sampler/multipack.
//
// Examples are taken longest first (ties by index, so the result depends on
// the lengths alone) and each goes into the FIRST row, in the order rows
// were opened, that still has room for it; a new row is opened when none
// has. FFD uses at most 11/9 OPT + 6/9 rows (Dosa 2007); on fine-tuning
// data, where most examples are small against the row, it leaves only the
// last few rows partly empty.
//
// "The first row with room" is a query on a max-tree over the rooms left
// (unopened rows count as empty ones), so packing n examples costs
// O(n log n) instead of the O(n x rows) of a linear scan.
#pragma once

#include <cstdint>
#include <vector>

namespace ftcore::plugins::samplers {

// Rows of example indices, in the order the rows were opened; inside a row
// the examples are in the order they were placed (longest first). Every
// length must lie in [0, capacity].
std::vector<std::vector<int64_t>> pack_first_fit_decreasing(const std::vector<int64_t>& lengths, int64_t capacity);

}  // namespace ftcore::plugins::samplers

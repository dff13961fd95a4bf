// The shapes of a Linear's one-mm form, shared by the custom Linear nodes
// (recast_weight_linear.h, widened_gemm.h): x [..., in] folded to [rows, in]
// and the output's [..., out].
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// x folded to [rows, in], as at::matmul folds a contiguous input for mm.
inline at::Tensor rows_of(const at::Tensor& x) { return x.reshape({-1, x.size(-1)}); }

// x's leading sizes with the last one replaced by `last` ([..., last]).
inline std::vector<int64_t> sizes_with_last(const at::Tensor& x, int64_t last) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - 1);
  sizes.push_back(last);
  return sizes;
}

}  // namespace ftcore::model

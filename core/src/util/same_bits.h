// Whether two tensors have the same dtype, shape and bytes: equality bit for
// bit (-0 differs from 0, a NaN equals the same NaN), which at::equal's
// value comparison is not.
#pragma once

#include <cstring>

#include <ATen/core/Tensor.h>

namespace ftcore {

inline bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor ca = a.contiguous().cpu(), cb = b.contiguous().cpu();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), static_cast<size_t>(ca.numel()) * ca.element_size()) == 0;
}

}  // namespace ftcore

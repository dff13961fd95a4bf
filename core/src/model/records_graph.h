// Whether autograd records an op on these tensors now: grad mode is on and
// one of them requires grad. Paths that give the same values by other means
// (fused, in place, recomputed) are taken only where nothing is recorded.
#pragma once

#include <functional>
#include <initializer_list>

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>

namespace ftcore::model {

inline bool records_graph(std::initializer_list<std::reference_wrapper<const at::Tensor>> inputs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

}  // namespace ftcore::model

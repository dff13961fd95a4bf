// Whether an op may write its result over `t` instead of allocating a new
// tensor: no graph is recorded through t, and no other tensor, view or
// saved variable reaches its storage (t is the caller's only handle). On
// the CPU a fresh [tokens, width] result costs its page faults on every
// forward (glibc serves such sizes with new mappings), often more than the
// op; results are the same bits, because the same kernel runs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/InferenceMode.h>

#include "records_graph.h"

namespace ftcore::model {

inline bool reusable_in_place(const at::Tensor& t) {
  if (!t.defined() || records_graph({t})) return false;
  if (t.is_inference() && !c10::InferenceMode::is_enabled()) return false;  // ATen refuses that write
  if (!t.is_non_overlapping_and_dense()) return false;  // an expanded view would be written twice
  if (t.use_count() != 1) return false;
  // A view (the attention's [B, H, T, D] of a projection's output) keeps its
  // base alive: then the base, held by the view alone, is the storage's other owner.
  if (t.is_view()) return t._base().use_count() == 1 && t.storage().use_count() == 2;
  return t.storage().use_count() == 1;
}

}  // namespace ftcore::model

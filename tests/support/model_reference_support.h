// What the model tests share (model_test, model_families_test,
// moe_model_test): the tiny reference models of
// tests/reference/model_reference.py (made at test time with transformers),
// masked logit comparisons and packed rows. Shapes: B rows, T tokens, V vocabulary.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "ftcore/model.h"
#include "ftcore/safetensors.h"
#include "test_support.h"

namespace ftcore::testing {

struct ModelReference {
  at::Tensor input_ids, attention_mask, position_ids, logits;
};

inline ModelReference read_model_reference(const std::filesystem::path& file) {
  auto f = safetensors::File::open(file);
  return {f->tensor("input_ids").clone(), f->tensor("attention_mask").clone(), f->tensor("position_ids").clone(),
          f->tensor("logits").clone()};
}

// Makes the named tiny model under `dir` (dir/model + dir/reference.safetensors);
// mode "tiny-generate" adds dir/generate.json.
inline void make_tiny(const TempDir& dir, const std::string& name, const std::string& mode = "tiny") {
  run_python("reference/model_reference.py", mode + " " + name + " " + shell_quote(dir.path().string()));
}

// max |a - b| over the positions where mask is 1; a, b [B, T, V].
inline double max_diff_on_tokens(const at::Tensor& a, const at::Tensor& b, const at::Tensor& mask) {
  at::Tensor keep = mask.ne(0).unsqueeze(-1);
  return (a.to(at::kFloat) - b.to(at::kFloat)).abs().masked_fill(keep.logical_not(), 0).max().item<double>();
}

inline at::Tensor logits_of(Model& model, const at::Tensor& ids, const at::Tensor& mask = {}) {
  at::NoGradGuard no_grad;
  ForwardInput in;
  in.input_ids = ids;
  in.attention_mask = mask;
  return model.forward(in).to(at::kFloat);
}

// Sequence ids [1, total]: sequences of `lengths` packed from the left, then padding (-1).
inline at::Tensor packed_sequence_ids(const std::vector<int64_t>& lengths, int64_t total) {
  std::vector<int64_t> seq;
  for (size_t s = 0; s < lengths.size(); ++s) seq.insert(seq.end(), lengths[s], static_cast<int64_t>(s));
  seq.resize(total, -1);
  return at::tensor(seq, at::kLong).unsqueeze(0);
}

// max |diff| between each sequence's logits in the packed forward (`packed` [1, T, V]) and the sequence run alone.
inline double packed_vs_alone(Model& model, const at::Tensor& ids, const at::Tensor& packed,
                              const std::vector<int64_t>& lengths) {
  int64_t start = 0;
  double worst = 0;
  for (int64_t n : lengths) {
    worst = std::max(worst, (packed.narrow(1, start, n) - logits_of(model, ids.narrow(1, start, n))).abs().max().item<double>());
    start += n;
  }
  return worst;
}

}  // namespace ftcore::testing

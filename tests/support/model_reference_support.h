// What the model tests share (model_test, model_families_test,
// moe_model_test): the tiny reference models of
// tests/reference/model_reference.py (made at test time with transformers),
// masked logit comparisons and packed rows. Shapes: B rows, T tokens, V vocabulary.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../../core/src/model/fused_norm_rope.h"
#include "../../core/src/util/same_bits.h"
#include "ftcore/model.h"
#include "ftcore/model_generation.h"
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

// A no-grad forward (model code free to fuse and work in place) gives the
// bits of the same forward recording a graph through every parameter (ATen's
// op chains, as autograd differentiates them); requires_grad is restored.
inline void expect_no_graph_forward_equals_recorded(Model& model, const at::Tensor& ids, const at::Tensor& mask) {
  // Else both forwards would run the chains and the comparison would test nothing.
  ASSERT_TRUE(ftcore::model::fused_norm_rope_match_aten());
  ForwardInput in;
  in.input_ids = ids;
  in.attention_mask = mask;
  at::Tensor plain;
  {
    at::NoGradGuard no_grad;
    plain = model.forward(in);
  }
  std::vector<std::pair<at::Tensor, bool>> trainable;
  for (auto& p : model.module().parameters()) {
    trainable.emplace_back(p, p.requires_grad());
    p.requires_grad_(true);
  }
  const at::Tensor recorded = model.forward(in).detach();
  for (auto& [p, was] : trainable) p.requires_grad_(was);
  EXPECT_TRUE(ftcore::same_bits(recorded, plain))
      << c10::toString(plain.scalar_type()) << ": max |diff| "
      << (recorded.to(at::kFloat) - plain.to(at::kFloat)).abs().max().item<double>();
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

// generate_batch on model_reference.py's generate_batch.json: the three
// prompts left-padded in one batch give transformers' batched greedy tokens,
// without a stop token (14 each) and with one that ends the rows at
// different steps (each row up to and including it).
inline void expect_batch_generation_matches(Model& model, const std::filesystem::path& file) {
  const nlohmann::json ref = nlohmann::json::parse(std::ifstream(file));
  const auto prompts = ref["prompt_ids"].get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(prompts.size(), 3u);
  SamplingOptions options;
  options.max_new_tokens = 14;
  for (const char* key : {"generated", "stopped"}) {
    if (std::string(key) == "stopped") options.stop_token_ids = {ref["stop_token"].get<int64_t>()};
    const auto expected = ref[key].get<std::vector<std::vector<int64_t>>>();
    const std::vector<GenerationResult> results = generate_batch(model, prompts, options);
    ASSERT_EQ(results.size(), prompts.size());
    for (size_t b = 0; b < prompts.size(); ++b)
      EXPECT_EQ(results[b].tokens, expected[b]) << key << ", row " << b << " of a left-padded batch";
  }
}

}  // namespace ftcore::testing

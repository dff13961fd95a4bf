// The default model (SmolLM2-135M-Instruct, when third_party/setup_defaults.sh
// fetched it) against transformers in fp32 and bf16, greedy generation against
// transformers' generate(do_sample=False), batched greedy generation of tiny
// Llamas against transformers' batched generate, and the sampling warpers.
// Part of the model_test binary. Shapes: B rows, T tokens, V vocabulary.
#include <fstream>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/model_generation.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "model_reference_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ftcore::ForwardInput;
using ftcore::Model;
using ftcore::testing::TempDir;

namespace {

fs::path default_model_dir() { return fs::path(FTCORE_SOURCE_DIR) / "third_party/models/SmolLM2-135M-Instruct"; }

#define SKIP_WITHOUT_DEFAULT_MODEL()                                                                  \
  if (!fs::exists(default_model_dir() / "model.safetensors"))                                        \
  GTEST_SKIP() << "SKIPPED: default model absent at " << default_model_dir()                         \
               << " (run third_party/setup_defaults.sh); this check did not run"

// Logits of ftcore vs transformers on the same padded batch; prints both the
// absolute and the scale-relative (max |diff| / max |ref|) difference.
void compare_default(const std::string& dtype_name, c10::ScalarType dtype, double relative_bound) {
  ftcore::init_runtime();
  TempDir dir;
  ftcore::testing::run_python("reference/model_reference.py",
                              "default " + dtype_name + " " + ftcore::testing::shell_quote(dir.path().string()));
  auto f = ftcore::safetensors::File::open(dir / "reference.safetensors");
  ftcore::LoadOptions options;
  options.dtype = dtype;
  auto model = Model::from_pretrained(default_model_dir(), options);
  at::NoGradGuard no_grad;
  ForwardInput in;
  in.input_ids = f->tensor("input_ids");
  in.attention_mask = f->tensor("attention_mask");
  at::Tensor ours = model->forward(in).to(at::kFloat);
  at::Tensor ref = f->tensor("logits");
  at::Tensor keep = in.attention_mask.ne(0).unsqueeze(-1);
  const double diff = (ours - ref).abs().masked_fill(keep.logical_not(), 0).max().item<double>();
  const double scale = ref.abs().masked_fill(keep.logical_not(), 0).max().item<double>();
  const double argmax_agree =
      ours.argmax(-1).eq(ref.argmax(-1)).masked_select(in.attention_mask.ne(0)).to(at::kFloat).mean().item<double>();
  std::cout << "[ measure ] default model " << dtype_name << ": max |logit diff| = " << diff << ", logit scale " << scale
            << ", relative " << diff / scale << ", argmax agreement " << argmax_agree << "\n";
  EXPECT_LT(diff / scale, relative_bound);
}

TEST(ModelDefault, Fp32MatchesTransformers) {
  SKIP_WITHOUT_DEFAULT_MODEL();
  compare_default("fp32", at::kFloat, 1e-4);
}

// bf16 on both sides: both round every op's output to bf16 (8 mantissa bits,
// relative step 2^-8 = 0.0039), in different orders through 30 layers, so the
// bound is a few bf16 steps of the logit scale.
TEST(ModelDefault, Bf16MatchesTransformersWithinBf16Rounding) {
  SKIP_WITHOUT_DEFAULT_MODEL();
  compare_default("bf16", at::kBFloat16, 0.03);
}

TEST(ModelDefault, GreedyGenerationMatchesTransformers) {
  SKIP_WITHOUT_DEFAULT_MODEL();
  ftcore::init_runtime();
  TempDir dir;
  ftcore::testing::run_python("reference/model_reference.py",
                              "generate " + ftcore::testing::shell_quote(dir.path().string()));
  nlohmann::json cases = nlohmann::json::parse(std::ifstream(dir / "generate.json"));
  auto model = Model::from_pretrained(default_model_dir());
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    ftcore::SamplingOptions options;
    options.max_new_tokens = 24;
    options.stop_token_ids = c["eos"].is_array() ? c["eos"].get<std::vector<int64_t>>()
                                                 : std::vector<int64_t>{c["eos"].get<int64_t>()};
    std::vector<int64_t> streamed;
    auto result = ftcore::generate(*model, c["prompt_ids"].get<std::vector<int64_t>>(), options,
                                   [&](int64_t t) { streamed.push_back(t); return true; });
    auto expected = c["generated"].get<std::vector<int64_t>>();
    EXPECT_EQ(result.tokens, expected) << "prompt: " << c["prompt"];
    EXPECT_EQ(streamed, result.tokens);
    size_t same = 0;
    while (same < expected.size() && same < result.tokens.size() && expected[same] == result.tokens[same]) ++same;
    std::cout << "[ measure ] greedy '" << c["prompt"].get<std::string>() << "': " << same << "/" << expected.size()
              << " tokens equal transformers\n";
  }
}

// Batched greedy generation (left padding, one KV cache, rows stopping on
// their own) vs transformers' batched generate on tiny Llamas: tied
// embeddings with GQA, and a sliding window shorter than the sequences.
class TinyBatchGeneration : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyBatchGeneration, MatchesTransformersBatchedGenerate) {
  ftcore::init_runtime();
  TempDir dir;
  ftcore::testing::make_tiny(dir, GetParam(), "tiny-generate");
  auto model = Model::from_pretrained(dir / "model");
  ftcore::testing::expect_batch_generation_matches(*model, dir / "generate_batch.json");
}

INSTANTIATE_TEST_SUITE_P(Llama, TinyBatchGeneration, ::testing::Values("llama_gqa_tied", "mistral_window"));

TEST(TinyBatchGeneration, RefusesEmptyInputsNamingTheRow) {
  ftcore::init_runtime();
  ftcore::SamplingOptions o;
  TempDir dir;
  ftcore::testing::make_tiny(dir, "llama_gqa_tied");
  auto model = Model::from_pretrained(dir / "model");
  EXPECT_THROW(ftcore::generate_batch(*model, {}, o), std::invalid_argument);
  try {
    ftcore::generate_batch(*model, {{5, 6}, {}}, o);
    ADD_FAILURE() << "an empty prompt was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("prompt 1 is empty"), std::string::npos) << e.what();
  }
}

// Expected values printed by transformers 5.24's own warpers on these logits:
// TopKLogitsWarper(2)(TemperatureLogitsWarper(0.5)(l)) = [-inf, 6, 4, -inf, 4] (ties with the k-th stay),
// TopPLogitsWarper(0.5)(l) = [-inf, 3, -inf, -inf, -inf] (probabilities .07 .52 .19 .03 .19).
TEST(Sampling, WarpersFollowTransformers) {
  const float inf = std::numeric_limits<float>::infinity();
  at::Tensor logits = at::tensor({1.0f, 3.0f, 2.0f, 0.0f, 2.0f});
  ftcore::SamplingOptions o;
  o.temperature = 0.5;
  o.top_k = 2;
  EXPECT_TRUE(at::equal(ftcore::warp_logits(logits, o), at::tensor({-inf, 6.0f, 4.0f, -inf, 4.0f})));
  o = {};
  o.temperature = 1.0;
  o.top_p = 0.5;
  EXPECT_TRUE(at::equal(ftcore::warp_logits(logits, o), at::tensor({-inf, 3.0f, -inf, -inf, -inf})));
  o.top_p = 0.75;  // cumulative ascending .03 .10 .29 (<= .25 drops the first two only)
  EXPECT_TRUE(at::equal(ftcore::warp_logits(logits, o), at::tensor({-inf, 3.0f, 2.0f, -inf, 2.0f})));
}

TEST(Sampling, SeededDrawsRepeatAndTopKOneIsGreedy) {
  at::Tensor logits = at::randn({50});
  ftcore::SamplingOptions o;
  o.temperature = 1.3;
  o.top_p = 0.9;
  auto draw = [&](uint64_t seed) {
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(seed);
    std::vector<int64_t> out;
    for (int i = 0; i < 20; ++i) out.push_back(ftcore::choose_token(logits, o, g));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
  o.top_k = 1;
  at::Generator g = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_EQ(ftcore::choose_token(logits, o, g), logits.argmax().item<int64_t>());
  ftcore::SamplingOptions bad;
  bad.top_p = 0.0;
  EXPECT_THROW(ftcore::validate_sampling_options(bad), std::invalid_argument);
}

}  // namespace

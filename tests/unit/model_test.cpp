// ftcore::Model against transformers: tiny random models (made and saved by
// tests/reference/model_reference.py with a fixed seed) for every supported
// feature, the default model in fp32 and bf16 when it is set up, greedy
// generation; and self-consistency: packed rows vs sequences alone, KV-cache
// decoding vs full recompute, checkpointed vs plain gradients (and the tied
// lm_head's in-place gradient sum taken in fp32), Linear slots, loading
// errors. Shapes: B rows, T tokens, V vocabulary.
#include <fstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/model_generation.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "../../core/src/model/tied_embedding_gradient.h"
#include "model_reference_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ftcore::ForwardInput;
using ftcore::Model;
using ftcore::testing::TempDir;

namespace {

using ftcore::testing::logits_of;
using ftcore::testing::make_tiny;
using ftcore::testing::max_diff_on_tokens;
using Reference = ftcore::testing::ModelReference;
using ftcore::testing::read_model_reference;

class TinyReference : public ::testing::TestWithParam<std::string> {};

// fp32 logits vs transformers, rows unpadded, left- and right-padded, within 1e-5
// (the other families: model_families_test.cpp).
TEST_P(TinyReference, LogitsMatchTransformers) {
  ftcore::init_runtime();
  TempDir dir;
  make_tiny(dir, GetParam());
  auto model = Model::from_pretrained(dir / "model");
  Reference ref = read_model_reference(dir / "reference.safetensors");
  at::Tensor logits = logits_of(*model, ref.input_ids, ref.attention_mask);
  const double diff = max_diff_on_tokens(logits, ref.logits, ref.attention_mask);
  std::cout << "[ measure ] " << GetParam() << " fp32 max |logit diff| vs transformers = " << diff << "\n";
  EXPECT_LT(diff, 1e-5);
  // Fused and in-place without a graph == ATen's chains with one, fp32 and bf16 (model_reference_support.h).
  ftcore::testing::expect_no_graph_forward_equals_recorded(*model, ref.input_ids, ref.attention_mask);
  ftcore::LoadOptions bf16;
  bf16.dtype = at::kBFloat16;
  ftcore::testing::expect_no_graph_forward_equals_recorded(*Model::from_pretrained(dir / "model", bf16), ref.input_ids,
                                                           ref.attention_mask);
  // The default positions are the ones transformers was given (padding skipped).
  ForwardInput in;
  in.input_ids = ref.input_ids;
  in.attention_mask = ref.attention_mask;
  in.position_ids = ref.position_ids;
  at::NoGradGuard no_grad;
  EXPECT_LT(max_diff_on_tokens(model->forward(in), logits, ref.attention_mask), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Configs, TinyReference,
                         ::testing::Values("llama_gqa_tied", "llama_mha_bias", "llama_rope_linear",
                                           "llama_rope_dynamic", "llama_rope_llama3", "qwen2_bias", "mistral_window"));

// Three sequences packed in one row (plus padding) give each sequence's own logits.
TEST(ModelTest, PackedRowsEqualSequencesAlone) {
  ftcore::init_runtime();
  for (const std::string name : {"llama_gqa_tied", "mistral_window"}) {
    TempDir dir;
    make_tiny(dir, name);
    auto model = Model::from_pretrained(dir / "model");
    const std::vector<int64_t> lengths = {5, 9, 4};
    at::Tensor ids = at::randint(3, model->config().vocab_size, {1, 20}, at::kLong);
    ForwardInput packed;
    packed.input_ids = ids;
    packed.sequence_ids = ftcore::testing::packed_sequence_ids(lengths, 20);
    at::NoGradGuard no_grad;
    at::Tensor all = model->forward(packed);
    const double worst = ftcore::testing::packed_vs_alone(*model, ids, all, lengths);
    std::cout << "[ measure ] " << name << " packed vs alone max |diff| = " << worst << "\n";
    EXPECT_LT(worst, 1e-5);
    // As collate() hands them over: int32 sequence ids, the attention mask and restarting positions.
    ForwardInput collated;
    collated.input_ids = ids;
    collated.sequence_ids = packed.sequence_ids.to(at::kInt);
    collated.attention_mask = packed.sequence_ids.ge(0).to(at::kLong);
    std::vector<int64_t> positions;
    for (int64_t n : lengths)
      for (int64_t i = 0; i < n; ++i) positions.push_back(i);
    positions.resize(20, 0);
    collated.position_ids = at::tensor(positions, at::kLong).unsqueeze(0);
    at::Tensor again = model->forward(collated);
    EXPECT_TRUE(at::equal(again.narrow(1, 0, 18), all.narrow(1, 0, 18)));
    collated.attention_mask = at::ones({1, 20}, at::kLong);  // disagrees on the padding
    EXPECT_THROW(model->forward(collated), c10::Error);
  }
}

// Prefill + one-token steps with the cache (a left-padded row, a sliding
// window shorter than the sequence) equal a full forward of the whole sequence.
TEST(ModelTest, KVCacheDecodingEqualsFullRecompute) {
  ftcore::init_runtime();
  for (const std::string name : {"llama_gqa_tied", "mistral_window"}) {
    TempDir dir;
    make_tiny(dir, name);
    auto model = Model::from_pretrained(dir / "model");
    at::Tensor ids = at::randint(3, model->config().vocab_size, {2, 14}, at::kLong);
    at::Tensor mask = at::ones({2, 14}, at::kLong);
    mask.select(0, 1).narrow(0, 0, 3).fill_(0);  // row 1: 3 tokens of left padding
    at::Tensor full = logits_of(*model, ids, mask);
    at::NoGradGuard no_grad;
    ftcore::KVCache cache;
    const int64_t prompt = 6;
    ForwardInput in;
    in.cache = &cache;
    in.input_ids = ids.narrow(1, 0, prompt);
    in.attention_mask = mask.narrow(1, 0, prompt);
    double worst = max_diff_on_tokens(model->forward(in), full.narrow(1, 0, prompt), in.attention_mask);
    for (int64_t t = prompt; t < 14; ++t) {
      in.input_ids = ids.narrow(1, t, 1);
      in.attention_mask = mask.narrow(1, t, 1);
      worst = std::max(worst, (model->forward(in) - full.narrow(1, t, 1)).abs().max().item<double>());
    }
    EXPECT_EQ(cache.length(), 14);
    std::cout << "[ measure ] " << name << " KV-cache decode vs full max |diff| = " << worst << "\n";
    EXPECT_LT(worst, 1e-5);
  }
}

// Checkpointed layers give the gradients of the plain backward, for full
// fine-tuning and with a frozen embedding (as under an adapter).
TEST(ModelTest, GradientCheckpointingGivesIdenticalGradients) {
  ftcore::init_runtime();
  TempDir dir;
  make_tiny(dir, "llama_gqa_tied");
  auto model = Model::from_pretrained(dir / "model");
  Reference ref = read_model_reference(dir / "reference.safetensors");
  at::Tensor weights = at::randn({3, 20, model->config().vocab_size});
  for (bool freeze_embedding : {false, true}) {
    for (auto& p : model->named_parameters())
      p.tensor.set_requires_grad(!(freeze_embedding && p.name == "model.embed_tokens.weight"));
    std::map<std::string, at::Tensor> grads[2];
    const int64_t sums_before = ftcore::model::tied_gradient_sums_taken();
    for (int mode = 0; mode < 2; ++mode) {
      model->set_gradient_checkpointing(mode == 1);
      model->module().zero_grad();
      ForwardInput in;
      in.input_ids = ref.input_ids;
      in.attention_mask = ref.attention_mask;
      (model->forward(in) * weights * ref.attention_mask.unsqueeze(-1)).sum().backward();
      for (auto& p : model->named_parameters())
        if (p.tensor.grad().defined()) grads[mode][p.name] = p.tensor.grad().clone();
    }
    // The tied lm_head's gradient took the embedding's rows in place, in fp32 too (tied_embedding_gradient.h).
    EXPECT_EQ(ftcore::model::tied_gradient_sums_taken() - sums_before, freeze_embedding ? 0 : 2);
    ASSERT_EQ(grads[0].size(), grads[1].size());
    ASSERT_EQ(grads[0].size(), model->named_parameters().size() - (freeze_embedding ? 1 : 0));
    double worst = 0;
    for (auto& [name, g] : grads[0]) {
      ASSERT_TRUE(grads[1].count(name)) << name;
      ASSERT_FALSE(g.isnan().any().item<bool>()) << name;
      worst = std::max(worst, (g - grads[1][name]).abs().max().item<double>());
    }
    std::cout << "[ measure ] checkpointed vs plain max |grad diff| (frozen embedding " << freeze_embedding
              << ") = " << worst << "\n";
    EXPECT_EQ(worst, 0.0);
  }
}

// A module that doubles a slot's output, to see replace_linear take effect.
class DoublingLinear : public ftcore::sdk::LinearModule {
 public:
  explicit DoublingLinear(std::shared_ptr<ftcore::sdk::LinearModule> base) : base_(register_module("base", base)) {}
  at::Tensor forward(const at::Tensor& x) override { return 2 * base_->forward(x); }
  int64_t in_features() const override { return base_->in_features(); }
  int64_t out_features() const override { return base_->out_features(); }
  at::Tensor dense_weight() const override { return 2 * base_->dense_weight(); }

 private:
  std::shared_ptr<ftcore::sdk::LinearModule> base_;
};

TEST(ModelTest, LinearSlotsAreNamedAndReplaceable) {
  TempDir dir;
  make_tiny(dir, "llama_gqa_tied");
  auto model = Model::from_pretrained(dir / "model");
  auto paths = model->linear_paths();
  ASSERT_EQ(paths.size(), 3u * 7 + 1);
  EXPECT_EQ(paths[0], "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(paths.back(), "lm_head");
  auto q = model->linear("model.layers.1.self_attn.q_proj");
  EXPECT_EQ(q->in_features(), 64);
  EXPECT_EQ(q->out_features(), 64);
  EXPECT_EQ(model->linear("model.layers.1.self_attn.k_proj")->out_features(), 32);  // GQA: 2 kv heads x 16
  // Tied: lm_head is the embedding, listed once under the embedding's name.
  auto params = model->named_parameters();
  EXPECT_EQ(params.front().name, "model.embed_tokens.weight");
  for (auto& p : params) EXPECT_NE(p.name, "lm_head.weight");
  EXPECT_TRUE(model->linear("lm_head")->dense_weight().is_same(params.front().tensor));

  at::Tensor ids = at::randint(3, 96, {1, 8}, at::kLong);
  at::Tensor before = logits_of(*model, ids);
  model->replace_linear("model.layers.2.mlp.down_proj",
                        std::make_shared<DoublingLinear>(model->linear("model.layers.2.mlp.down_proj")));
  EXPECT_GT((logits_of(*model, ids) - before).abs().max().item<double>(), 1e-3);
  bool renamed = false;
  for (auto& p : model->named_parameters()) renamed |= p.name == "model.layers.2.mlp.down_proj.base.weight";
  EXPECT_TRUE(renamed);
  EXPECT_THROW(model->linear("model.layers.9.self_attn.q_proj"), ftcore::ModelError);
  EXPECT_THROW(model->replace_linear("model.layers.0.self_attn.k_proj", q), ftcore::ModelError);  // 64 -> 64 vs 64 -> 32
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

std::string expect_model_error(const fs::path& dir) {
  try {
    Model::from_pretrained(dir);
  } catch (const ftcore::ModelError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ModelError for " << dir;
  return "";
}

TEST(ModelTest, LoadingIsStrictAndNamesProblems) {
  TempDir dir;
  make_tiny(dir, "qwen2_bias");
  const fs::path good = dir / "model";
  auto tensors = ftcore::safetensors::File::open(good / "model.safetensors")->read_all();
  const std::string config = [&] { std::ifstream in(good / "config.json"); return std::string(std::istreambuf_iterator<char>(in), {}); }();
  auto variant = [&](const std::string& name, ftcore::sdk::TensorMap map, std::string cfg) {
    fs::path d = dir / name;
    fs::create_directories(d);
    write_text(d / "config.json", cfg);
    if (!map.tensors.empty()) ftcore::safetensors::write_file(d / "model.safetensors", map);
    return d;
  };
  auto without = tensors;
  without.tensors.erase(std::remove_if(without.tensors.begin(), without.tensors.end(),
                                       [](auto& t) { return t.first == "model.layers.1.self_attn.k_proj.bias"; }),
                        without.tensors.end());
  EXPECT_NE(expect_model_error(variant("missing", without, config)).find("model.layers.1.self_attn.k_proj.bias"),
            std::string::npos);
  auto reshaped = tensors;
  for (auto& t : reshaped.tensors)
    if (t.first == "model.norm.weight") t.second = at::ones({65});
  std::string msg = expect_model_error(variant("shape", reshaped, config));
  EXPECT_NE(msg.find("model.norm.weight: [65] in the checkpoint, the config needs [64]"), std::string::npos) << msg;
  auto extra = tensors;
  extra.add("model.layers.0.mlp.extra.weight", at::ones({2}));
  EXPECT_NE(expect_model_error(variant("extra", extra, config)).find("model.layers.0.mlp.extra.weight"), std::string::npos);
  std::string gpt2 = config;
  gpt2.replace(gpt2.find("Qwen2ForCausalLM"), 16, "GPT2LMHeadModel");
  EXPECT_NE(expect_model_error(variant("arch", tensors, gpt2)).find("unsupported architecture 'GPT2LMHeadModel'"),
            std::string::npos);
  std::string yarn = config;
  yarn.replace(yarn.find("\"default\""), 9, "\"yarn\", \"factor\": 2.0");
  EXPECT_NE(expect_model_error(variant("yarn", tensors, yarn)).find("rope type 'yarn' is not supported"), std::string::npos);
  EXPECT_NE(expect_model_error(variant("noweights", {}, config)).find("no model.safetensors"), std::string::npos);

  // Two shards and an index (and the 4.x key torch_dtype) load to the same logits.
  fs::path sharded = dir / "sharded";
  fs::create_directories(sharded);
  std::string old_style = config;
  old_style.replace(old_style.find("\"dtype\""), 7, "\"torch_dtype\"");
  write_text(sharded / "config.json", old_style);
  ftcore::sdk::TensorMap parts[2];
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  for (size_t i = 0; i < tensors.tensors.size(); ++i) {
    parts[i % 2].add(tensors.tensors[i].first, tensors.tensors[i].second);
    index["weight_map"][tensors.tensors[i].first] = "model-0000" + std::to_string(i % 2 + 1) + "-of-00002.safetensors";
  }
  ftcore::safetensors::write_file(sharded / "model-00001-of-00002.safetensors", parts[0]);
  ftcore::safetensors::write_file(sharded / "model-00002-of-00002.safetensors", parts[1]);
  write_text(sharded / "model.safetensors.index.json", index.dump());
  at::Tensor ids = at::randint(3, 96, {2, 9}, at::kLong);
  EXPECT_TRUE(at::equal(logits_of(*Model::from_pretrained(good), ids), logits_of(*Model::from_pretrained(sharded), ids)));
}

// bf16 and fp16 weights run and stay near fp32 (tiny model, loose bound).
TEST(ModelTest, HalfPrecisionDtypesRun) {
  TempDir dir;
  make_tiny(dir, "llama_gqa_tied");
  Reference ref = read_model_reference(dir / "reference.safetensors");
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    ftcore::LoadOptions options;
    options.dtype = dtype;
    auto model = Model::from_pretrained(dir / "model", options);
    EXPECT_EQ(model->dtype(), dtype);
    at::Tensor logits;
    {
      at::NoGradGuard no_grad;
      ForwardInput in;
      in.input_ids = ref.input_ids;
      in.attention_mask = ref.attention_mask;
      logits = model->forward(in);
    }
    EXPECT_EQ(logits.scalar_type(), dtype);
    const double diff = max_diff_on_tokens(logits, ref.logits, ref.attention_mask);
    const double scale = ref.logits.abs().max().item<double>();
    std::cout << "[ measure ] tiny " << ftcore::dtype_display_name(dtype) << " vs transformers fp32: max |diff| = " << diff
              << " (logit scale " << scale << ")\n";
    EXPECT_LT(diff, 0.05 * scale);
  }
}

TEST(ModelTest, CudaMatchesCpu) {
  if (!ftcore::load_cuda_runtime() || !at::hasCUDA()) GTEST_SKIP() << "no CUDA device: CUDA path not exercised";
  TempDir dir;
  make_tiny(dir, "mistral_window");
  Reference ref = read_model_reference(dir / "reference.safetensors");
  ftcore::LoadOptions options;
  options.device = c10::Device(c10::kCUDA, 0);
  auto model = Model::from_pretrained(dir / "model", options);
  const double diff = max_diff_on_tokens(logits_of(*model, ref.input_ids, ref.attention_mask).cpu(), ref.logits,
                                         ref.attention_mask);
  std::cout << "[ measure ] CUDA fp32 max |logit diff| vs transformers CPU = " << diff << "\n";
  EXPECT_LT(diff, 1e-3);  // TF32-free fp32 GEMMs on GPU differ from CPU in summation order only
}

}  // namespace

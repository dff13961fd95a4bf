// Mixture-of-experts models (model_moe.h: Mixtral, Qwen3-MoE with dense and
// sparse layers mixed) against transformers and PEFT on tiny random configs
// made at test time by tests/reference/moe_reference.py: which layers are
// sparse, fp32 logits (left and right padding, packed rows), each layer's
// router choices, the load-balancing loss, greedy generation with the KV
// cache; full fine-tuning gradients (the grouped expert matmul's backward) vs
// transformers; LoRA as PEFT's all-linear does it on transformers 5's MoE
// models (attention Linear modules plus target_parameters: routers and fused
// expert stacks): the picks, the initial factors for one seed, loss and A/B
// gradients with the aux loss in the loss, merge vs merge_and_unload, PEFT
// loading ftcore's adapter; both checkpoint layouts (per-expert and fused);
// loading and targeting errors.
// Shapes: B rows, T tokens, V vocabulary, N = B x T, K experts per token.
#include <fstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/model_generation.h"
#include "ftcore/model_moe.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/adapter.h"
#include "model_reference_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ftcore::ForwardInput;
using ftcore::Model;
using ftcore::testing::max_diff_on_tokens;
using ftcore::testing::TempDir;

namespace {

constexpr double kLogitTolerance = 1e-5;  // fp32, transformers' op order
constexpr double kAuxTolerance = 1e-6;
constexpr double kGradTolerance = 1e-6;
const std::vector<int64_t> kPackedLengths = {5, 9, 4};  // moe_reference.py's PACKED_LENGTHS
constexpr int64_t kLoraSeed = 4321;  // moe_reference.py's LORA_SEED

ftcore::sdk::TensorMap read_all(const fs::path& file) { return ftcore::safetensors::File::open(file)->read_all(); }

const at::Tensor& get(const ftcore::sdk::TensorMap& map, const std::string& name) {
  const at::Tensor* t = map.find(name);
  if (!t) throw std::runtime_error("reference has no tensor " + name);
  return *t;
}

void make_tiny_moe(const TempDir& dir, const std::string& name) {
  ftcore::testing::run_python("reference/moe_reference.py",
                              "tiny " + name + " " + ftcore::testing::shell_quote(dir.path().string()));
}

struct Forward {
  at::Tensor logits;
  ftcore::model::RouterLogits router;
};

Forward run(Model& model, const ftcore::sdk::TensorMap& ref) {
  Forward f;
  ForwardInput in;
  in.input_ids = get(ref, "input_ids");
  in.attention_mask = get(ref, "attention_mask");
  in.router_logits = &f.router;
  f.logits = model.forward(in).to(at::kFloat);
  return f;
}

// transformers' causal LM loss (labels shifted, mean over targets) + coef x aux, as MixtralForCausalLM forms it.
at::Tensor training_loss(Model& model, const ftcore::sdk::TensorMap& ref, const Forward& f,
                         const std::string& labels = "labels") {
  const auto& c = model.config();
  const int64_t t = f.logits.size(1), v = f.logits.size(2);
  const at::Tensor ce = at::cross_entropy_loss(f.logits.narrow(1, 0, t - 1).reshape({-1, v}),
                                               get(ref, labels).narrow(1, 1, t - 1).reshape({-1}), {},
                                               at::Reduction::Mean, -100);
  return ce + c.router_aux_loss_coef *
                  ftcore::load_balancing_loss(f.router, c.num_experts, c.num_experts_per_tok, get(ref, "attention_mask"));
}

std::shared_ptr<ftcore::sdk::Adapter> make_lora(const std::vector<std::string>& targets) {
  const auto& entry = ftcore::testing::in_tree_entry(ftcore::sdk::ComponentKind::Adapter, "lora");
  return ftcore::testing::in_tree_registry().create_adapter(
      entry, ftcore::testing::options_for(entry, {{"r", int64_t{4}}, {"alpha", 8.0}, {"target_modules", targets}}));
}

std::shared_ptr<ftcore::sdk::Adapter> make_all_linear_lora() { return make_lora({"all-linear"}); }

class MoeReference : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeReference, MatchesTransformersAndPeft) {
  ftcore::init_runtime();
  TempDir dir;
  make_tiny_moe(dir, GetParam());
  const auto ref = read_all(dir / "reference.safetensors");
  auto model = Model::from_pretrained(dir / "model");
  const auto& config = model->config();
  ASSERT_TRUE(config.is_moe());
  const at::Tensor mask = get(ref, "attention_mask");

  // 0. The layers transformers made sparse (mlp_only_layers, decoder_sparse_step) are ftcore's.
  const at::Tensor sparse = get(ref, "sparse_layers");
  ASSERT_EQ(static_cast<int64_t>(config.sparse_layers.size()), sparse.size(0));
  for (int64_t i = 0; i < sparse.size(0); ++i)
    EXPECT_EQ(config.sparse_layers[i], sparse[i].item<bool>()) << "layer " << i;

  // 0b. No-grad forwards (fused norms and RoPE, in-place adds onto the expert mix) equal a forward
  // recording a graph, bit for bit, in fp32 and bf16 (model_reference_support.h).
  ftcore::testing::expect_no_graph_forward_equals_recorded(*model, get(ref, "input_ids"), mask);
  ftcore::LoadOptions bf16;
  bf16.dtype = at::kBFloat16;
  ftcore::testing::expect_no_graph_forward_equals_recorded(*Model::from_pretrained(dir / "model", bf16),
                                                           get(ref, "input_ids"), mask);

  // 1. Logits, router choices and the aux loss.
  {
    at::NoGradGuard no_grad;
    model->module().eval();
    const Forward f = run(*model, ref);
    const double diff = max_diff_on_tokens(f.logits, get(ref, "logits"), mask);
    std::cout << "[ measure ] " << GetParam() << " fp32 max |logit diff| vs transformers = " << diff << "\n";
    EXPECT_LT(diff, kLogitTolerance);
    const at::Tensor chosen = get(ref, "router_experts");  // [layers, N, K]
    ASSERT_EQ(static_cast<int64_t>(f.router.size()), chosen.size(0));
    const at::Tensor real = mask.reshape(-1).ne(0);
    for (size_t layer = 0; layer < f.router.size(); ++layer) {
      const at::Tensor ours = std::get<1>(at::topk(at::softmax(f.router[layer], -1, at::kFloat), config.num_experts_per_tok, -1));
      EXPECT_TRUE(at::equal(ours.index({real}), chosen[layer].index({real})))
          << "layer " << layer << ": the router chose other experts than transformers'";
    }
    const double aux = ftcore::load_balancing_loss(f.router, config.num_experts, config.num_experts_per_tok, mask).item<double>();
    const double aux_ref = get(ref, "aux_loss").item<double>();
    std::cout << "[ measure ] " << GetParam() << " aux loss " << aux << " vs transformers " << aux_ref
              << ": |diff| = " << std::abs(aux - aux_ref) << "\n";
    EXPECT_LT(std::abs(aux - aux_ref), kAuxTolerance);

    // Packed rows: three sequences in one row give transformers' logits of each sequence alone.
    const at::Tensor alone = get(ref, "packed_alone");  // [1, 18, V]
    ForwardInput packed;
    packed.input_ids = get(ref, "packed_ids");
    packed.sequence_ids = ftcore::testing::packed_sequence_ids(kPackedLengths, packed.input_ids.size(1));
    const at::Tensor packed_logits = model->forward(packed).to(at::kFloat).narrow(1, 0, alone.size(1));
    const double packed_diff = (packed_logits - alone).abs().max().item<double>();
    std::cout << "[ measure ] " << GetParam() << " packed row vs transformers (each sequence alone) max |logit diff| = "
              << packed_diff << "\n";
    EXPECT_LT(packed_diff, kLogitTolerance);
  }

  // 2. Greedy generation with the KV cache.
  {
    const at::Tensor prompts = get(ref, "prompts"), generated = get(ref, "generated");
    for (int64_t row = 0; row < prompts.size(0); ++row) {
      ftcore::SamplingOptions options;
      options.max_new_tokens = generated.size(1);
      options.stop_token_ids = config.eos_token_ids;
      const at::Tensor p = prompts[row].contiguous();
      const auto result = ftcore::generate(*model, std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel()), options);
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < generated.size(1) && generated[row][i].item<int64_t>() >= 0; ++i)
        expected.push_back(generated[row][i].item<int64_t>());
      EXPECT_EQ(result.tokens, expected) << "prompt " << row;
    }
  }

  // 3. Full fine-tuning: every parameter's gradient (the grouped expert
  // matmul's backward for the expert stacks) against transformers'.
  {
    model->module().train();
    for (auto& p : model->named_parameters()) p.tensor.set_requires_grad(true);
    const Forward f = run(*model, ref);
    training_loss(*model, ref, f, "full_labels").backward();
    double diff = 0, expert_scale = 0;
    for (auto& p : model->named_parameters()) {
      const at::Tensor& theirs = get(ref, "full_grad." + p.name);
      const at::Tensor ours = p.tensor.grad();
      ASSERT_TRUE(ours.defined()) << p.name;
      const double d = (ours - theirs).abs().max().item<double>();
      EXPECT_LT(d, kGradTolerance) << p.name;
      diff = std::max(diff, d);
      if (p.name.find(".experts.") != std::string::npos) expert_scale = std::max(expert_scale, theirs.abs().max().item<double>());
      p.tensor.mutable_grad() = at::Tensor();
      p.tensor.set_requires_grad(false);
    }
    std::cout << "[ measure ] " << GetParam() << " full fine-tuning: max |grad diff| vs transformers = " << diff
              << " (max |expert grad| " << expert_scale << ")\n";
    EXPECT_GT(expert_scale, 1e-3);
  }

  // 4. LoRA (PEFT's all-linear: attention slots, and each sparse layer's router
  // and expert stacks as target_parameters) with the aux loss in the loss.
  auto adapter = make_all_linear_lora();
  at::manual_seed(kLoraSeed);
  const auto groups = adapter->apply(*model);
  ASSERT_EQ(groups.size(), 1u);
  // The Linear modules and parameters PEFT's all-linear adapts, and as many LoRA tensors as PEFT draws.
  std::vector<std::string> adapted_modules;
  for (const auto& p : groups[0].params) {
    const std::string module = p.name.substr(0, p.name.find(".lora_"));
    const bool parameter_target = module.find(".mlp.experts") != std::string::npos ||
                                  module.size() >= 9 && module.compare(module.size() - 9, 9, ".mlp.gate") == 0;
    if (!parameter_target &&
        std::find(adapted_modules.begin(), adapted_modules.end(), module) == adapted_modules.end())
      adapted_modules.push_back(module);
  }
  const nlohmann::json peft_picks = nlohmann::json::parse(std::ifstream(dir / "all_linear.json"));
  EXPECT_EQ(adapted_modules, peft_picks["modules"].get<std::vector<std::string>>())
      << "all-linear picks other Linear modules than PEFT";
  size_t peft_tensors = 0;
  for (const auto& [name, tensor] : ref.tensors) peft_tensors += name.rfind("init.", 0) == 0 ? 1 : 0;
  EXPECT_EQ(groups[0].params.size(), peft_tensors) << "PEFT's all-linear adapts " << peft_picks.dump();
  for (const auto& p : groups[0].params) {
    const at::Tensor& theirs = get(ref, "init." + p.name);
    ASSERT_EQ(p.tensor.sizes(), theirs.sizes()) << p.name;
    EXPECT_TRUE(at::equal(p.tensor, theirs)) << p.name << ": not PEFT's initial tensor for the same seed";
  }
  adapter->load(read_all(dir / "adapter" / "adapter_model.safetensors"));
  model->module().train();
  const Forward f = run(*model, ref);
  const at::Tensor loss = training_loss(*model, ref, f);
  loss.backward();
  const double loss_diff = std::abs(loss.item<double>() - get(ref, "lora_loss").item<double>());
  double grad_diff = 0, grad_scale = 0, expert_grad_scale = 0;
  for (const auto& p : groups[0].params) {
    const at::Tensor& theirs = get(ref, "grad." + p.name);
    ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
    const double diff = (p.tensor.grad() - theirs).abs().max().item<double>();
    EXPECT_LT(diff, kGradTolerance) << p.name;
    grad_diff = std::max(grad_diff, diff);
    grad_scale = std::max(grad_scale, theirs.abs().max().item<double>());
    if (p.name.find(".experts.") != std::string::npos)
      expert_grad_scale = std::max(expert_grad_scale, theirs.abs().max().item<double>());
  }
  std::cout << "[ measure ] " << GetParam() << " LoRA loss |diff| vs PEFT = " << loss_diff << ", " << groups[0].params.size()
            << " gradients (max |grad| " << grad_scale << ", experts " << expert_grad_scale << ") max |diff| = " << grad_diff
            << "\n";
  EXPECT_LT(loss_diff, kAuxTolerance);
  EXPECT_GT(expert_grad_scale, 1e-3) << "expert gradients too small for the comparison to mean much";

  // Merged into a fresh copy of the base: PEFT's merge_and_unload logits.
  {
    auto merged = Model::from_pretrained(dir / "model");
    for (auto& p : merged->named_parameters()) p.tensor.set_requires_grad(false);
    auto folded = make_all_linear_lora();
    folded->apply(*merged);
    folded->load(read_all(dir / "adapter" / "adapter_model.safetensors"));
    folded->merge(*merged);
    at::NoGradGuard no_grad;
    merged->module().eval();
    const double merge_diff = max_diff_on_tokens(run(*merged, ref).logits, get(ref, "merged_logits"), mask);
    std::cout << "[ measure ] " << GetParam() << " merged vs PEFT merge_and_unload max |logit diff| = " << merge_diff << "\n";
    EXPECT_LT(merge_diff, kLogitTolerance);
  }

  // 5. PEFT loads the adapter ftcore writes (after an SGD step, so the values
  // are ftcore's own): its logits equal ftcore's, and merge_and_unload()'s equal ftcore's merge.
  {
    at::NoGradGuard no_grad;
    for (const auto& p : groups[0].params) p.tensor.sub_(p.tensor.grad() * 0.5);
  }
  const fs::path out = dir / "ftcore_adapter";
  fs::create_directories(out);
  ftcore::safetensors::write_file(out / "adapter_model.safetensors", adapter->save());
  std::ofstream(out / "adapter_config.json") << adapter->peft_config_json();
  {
    at::NoGradGuard no_grad;
    model->module().eval();
    ftcore::sdk::TensorMap logits;
    logits.add("logits", run(*model, ref).logits.contiguous());
    adapter->merge(*model);
    logits.add("merged", run(*model, ref).logits.contiguous());
    ftcore::safetensors::write_file(out / "ftcore_logits.safetensors", logits);
  }
  const auto loaded = nlohmann::json::parse(ftcore::testing::run_python(
      "reference/moe_reference.py",
      "load " + ftcore::testing::shell_quote(out.string()) + " " + ftcore::testing::shell_quote((dir / "model").string())));
  std::cout << "[ measure ] PEFT with ftcore's adapter vs ftcore: max |logit diff| = " << loaded["max_diff"]
            << "; merge_and_unload vs ftcore's merge: " << loaded["merged_max_diff"] << "\n";
  size_t peft_modules = 0;
  for (const auto& [name, tensor] : read_all(dir / "adapter" / "adapter_model.safetensors").tensors)
    peft_modules += name.size() >= 13 && name.compare(name.size() - 13, 13, "lora_A.weight") == 0 ? 1 : 0;
  EXPECT_EQ(loaded["lora_modules"].get<size_t>(), peft_modules);
  EXPECT_LT(loaded["max_diff"].get<double>(), kLogitTolerance);
  EXPECT_LT(loaded["merged_max_diff"].get<double>(), kLogitTolerance);
}

INSTANTIATE_TEST_SUITE_P(Configs, MoeReference,
                         ::testing::Values("mixtral", "mixtral_window_top1", "qwen3_moe_mixed", "qwen3_moe_step2_window"));

// transformers 5's in-memory names (fused experts) load to the same weights as the per-expert layout.
TEST(MoeModel, FusedAndPerExpertLayoutsLoadAlike) {
  ftcore::init_runtime();
  TempDir dir;
  ftcore::testing::run_python("reference/moe_reference.py",
                              "fused mixtral " + ftcore::testing::shell_quote(dir.path().string()));
  make_tiny_moe(dir, "mixtral");
  auto per_expert = Model::from_pretrained(dir / "model");
  auto fused = Model::from_pretrained(dir / "fused_model");
  const auto a = per_expert->named_parameters(), b = fused->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_TRUE(at::equal(a[i].tensor, b[i].tensor)) << a[i].name;
  }
  EXPECT_EQ(a[6].name, "model.layers.0.mlp.experts.gate_up_proj");  // after embed_tokens, q/k/v/o, mlp.gate
}

// Incomplete expert sets and unsupported router options are refused by name.
TEST(MoeModel, ErrorsNameTheProblem) {
  ftcore::init_runtime();
  TempDir dir;
  make_tiny_moe(dir, "mixtral");
  auto tensors = ftcore::read_model_tensors(dir / "model");
  const auto config = ftcore::read_model_config(dir / "model");
  Model model(config, at::TensorOptions().dtype(at::kFloat));
  std::vector<std::pair<std::string, at::Tensor>> missing;
  for (const auto& t : tensors)
    if (t.first != "model.layers.1.block_sparse_moe.experts.2.w3.weight") missing.push_back(t);
  try {
    model.load_weights(missing, "tiny");
    ADD_FAILURE() << "a missing expert tensor was accepted";
  } catch (const ftcore::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.mlp.experts: expert 2 is missing"), std::string::npos) << e.what();
  }
  std::ifstream in(dir / "model" / "config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["router_jitter_noise"] = 0.1;
  EXPECT_THROW(ftcore::parse_model_config(j.dump(), "config.json"), ftcore::ModelError);
  j["router_jitter_noise"] = 0.0;
  j["num_experts_per_tok"] = 9;
  try {
    ftcore::parse_model_config(j.dump(), "config.json");
    ADD_FAILURE() << "top-9 of 4 experts was accepted";
  } catch (const ftcore::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("'num_experts_per_tok' must be in 1..4"), std::string::npos) << e.what();
  }
}

// `what` throws an exception whose message contains `needle`.
template <typename Exception, typename F>
void expect_error(F what, const std::string& needle) {
  try {
    what();
    ADD_FAILURE() << "accepted; expected an error saying: " << needle;
  } catch (const Exception& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Qwen3-MoE: bad layer lists are refused by name; the dense MLP layers stay
// Linear slots, but LoRA refuses to target them (PEFT reads those names as the experts).
TEST(MoeModel, Qwen3MoeLayersAndTargets) {
  ftcore::init_runtime();
  TempDir dir;
  make_tiny_moe(dir, "qwen3_moe_mixed");
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "model" / "config.json"));
  auto parse = [&](const nlohmann::json& config) { return ftcore::parse_model_config(config.dump(), "config.json"); };
  nlohmann::json bad = j;
  bad["mlp_only_layers"] = {2, 4};
  expect_error<ftcore::ModelError>([&] { parse(bad); }, "mlp_only_layers: 4 is not a layer index (0..3)");
  bad = j;
  bad["decoder_sparse_step"] = 0;
  expect_error<ftcore::ModelError>([&] { parse(bad); }, "'decoder_sparse_step' must be positive");
  bad = j;
  bad["num_experts"] = 5;  // the 4.x name of num_local_experts, disagreeing with it
  expect_error<ftcore::ModelError>([&] { parse(bad); }, "'num_local_experts' and 'num_experts'");
  bad = j;
  bad.erase("num_local_experts");
  bad["num_experts"] = 4;  // a 4.x config.json
  EXPECT_EQ(parse(bad).num_experts, 4);
  bad["mlp_only_layers"] = {0, 1, 2, 3};
  EXPECT_FALSE(parse(bad).is_moe()) << "every layer dense: a dense model";

  auto model = Model::from_pretrained(dir / "model");
  const auto paths = model->linear_paths();
  EXPECT_NE(std::find(paths.begin(), paths.end(), "model.layers.2.mlp.gate_proj"), paths.end());
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "model.layers.1.mlp.gate_proj"), paths.end());
  for (auto& p : model->named_parameters()) p.tensor.set_requires_grad(false);
  expect_error<std::exception>([&] { make_lora({"q_proj", "down_proj"})->apply(*model); },
                               "model.layers.2.mlp.down_proj, a dense MLP of a Qwen3-MoE model");
}

}  // namespace

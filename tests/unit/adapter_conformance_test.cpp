// The SDK's adapter conformance checks (sdk/include/ftcore/sdk/testing.h) on
// the in-tree adapters, and on deliberately broken adapters to show each
// check catches what it is meant to.
//
// Models: tiny random Llamas built in C++ (no Python): 2 layers, hidden 32,
// attention biases (DoRA subtracts them), tied or untied embeddings.
// Adapters: adapter/lora (q/v; all-linear + rsLoRA + lm_head trained in full;
// DoRA on all-linear; DoRA with dropout set, which eval mode switches off)
// and adapter/lora_plus (DoRA, norms and a biased slot trained in full).
#include <map>
#include <string>

#include <ATen/ATen.h>

#include "ftcore/model.h"
#include "ftcore/tiny_random_model.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/testing.h"
#include "test_support.h"

namespace {

namespace sdk = ftcore::sdk;
namespace conformance = ftcore::sdk::testing;

struct Case {
  std::string name, adapter;
  bool tied;
  std::map<std::string, sdk::ParamValue> options;
};

// Test names show the case, not the bytes of the struct.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  using strings = std::vector<std::string>;
  return {
      {"lora_qv", "lora", true, {}},
      {"lora_all_linear_rslora_lm_head", "lora", false,
       {{"r", int64_t{4}}, {"target_modules", strings{"all-linear"}}, {"use_rslora", true},
        {"modules_to_save", strings{"lm_head"}}}},
      {"dora_all_linear", "lora", false, {{"target_modules", strings{"all-linear"}}, {"use_dora", true}}},
      {"dora_dropout_tied", "lora", true,
       {{"target_modules", strings{"q_proj", "o_proj", "down_proj"}}, {"use_dora", true}, {"dropout", 0.1}}},
      {"lora_plus_dora_modules", "lora_plus", false,
       {{"loraplus_lr_ratio", 16.0}, {"use_dora", true}, {"modules_to_save", strings{"o_proj", "norm"}},
        {"target_modules", strings{"q_proj", "v_proj", "up_proj"}}}},
  };
}

conformance::AdapterFactory factory(const Case& c) {
  return [c] {
    const auto& entry = ftcore::testing::in_tree_entry(sdk::ComponentKind::Adapter, c.adapter);
    return ftcore::testing::in_tree_registry().create_adapter(entry, ftcore::testing::options_for(entry, c.options));
  };
}

class AdapterConformance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { ftcore::init_runtime(); }
};

TEST_P(AdapterConformance, ZeroInitIdentity) {
  auto model = ftcore::tiny_random_llama(GetParam().tied);
  const auto r = conformance::check_zero_init_identity(*model, ftcore::tiny_random_llama_logits, factory(GetParam()));
  EXPECT_TRUE(r.passed) << r.message;
  std::cout << "[ measure ] " << GetParam().name << ": " << r.message << "\n";
}

TEST_P(AdapterConformance, SaveLoadRoundTrip) {
  auto first = ftcore::tiny_random_llama(GetParam().tied), second = ftcore::tiny_random_llama(GetParam().tied);
  const auto r = conformance::check_save_load_round_trip(*first, *second, ftcore::tiny_random_llama_logits, factory(GetParam()));
  EXPECT_TRUE(r.passed) << r.message;
  std::cout << "[ measure ] " << GetParam().name << ": " << r.message << "\n";
}

TEST_P(AdapterConformance, MergeEquivalence) {
  auto model = ftcore::tiny_random_llama(GetParam().tied);
  const auto r = conformance::check_merge_equivalence(*model, ftcore::tiny_random_llama_logits, factory(GetParam()));
  EXPECT_TRUE(r.passed) << r.message;
  std::cout << "[ measure ] " << GetParam().name << ": " << r.message << "\n";
}

TEST_P(AdapterConformance, GradientFlow) {
  auto model = ftcore::tiny_random_llama(GetParam().tied);
  const auto r = conformance::check_gradient_flow(*model, ftcore::tiny_random_llama_logits, factory(GetParam()));
  EXPECT_TRUE(r.passed) << r.message;
  std::cout << "[ measure ] " << GetParam().name << ": " << r.message << "\n";
}

INSTANTIATE_TEST_SUITE_P(InTree, AdapterConformance, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

// A working LoRA adapter with one fault switched on.
enum class Fault { NonZeroInit, ForgetfulLoad, NoOpMerge, WrongMerge, HiddenTrainable, DeadTensor };

class FaultyAdapter : public sdk::Adapter {
 public:
  explicit FaultyAdapter(Fault fault) : fault_(fault) {
    const auto& entry = ftcore::testing::in_tree_entry(sdk::ComponentKind::Adapter, "lora");
    inner_ = ftcore::testing::in_tree_registry().create_adapter(entry, ftcore::testing::options_for(entry));
  }
  std::vector<sdk::ParamGroupSpec> apply(sdk::ModelView& model) override {
    auto groups = inner_->apply(model);
    at::NoGradGuard no_grad;
    for (auto& p : groups[0].params) {
      if (fault_ == Fault::NonZeroInit && p.name.ends_with("lora_B.weight")) p.tensor.fill_(0.01);
      if (fault_ == Fault::DeadTensor && p.name.ends_with("v_proj.lora_B.weight"))
        p.tensor.set_requires_grad(false).zero_();  // cut from the graph, still listed
    }
    if (fault_ == Fault::HiddenTrainable)
      for (auto& p : model.named_parameters())
        if (p.name == "model.norm.weight") p.tensor.set_requires_grad(true);  // trains but is in no group
    return groups;
  }
  sdk::TensorMap save() const override { return inner_->save(); }
  std::string peft_config_json() const override { return inner_->peft_config_json(); }
  void load(const sdk::TensorMap& weights) override {
    if (fault_ != Fault::ForgetfulLoad) inner_->load(weights);
  }
  void merge(sdk::ModelView& model) override {
    if (fault_ == Fault::NoOpMerge) return;
    if (fault_ == Fault::WrongMerge) {  // folds into a slightly different W
      at::NoGradGuard no_grad;
      for (auto& p : model.named_parameters())
        if (p.name.ends_with(".base_layer.weight")) p.tensor.mul_(1.01);
    }
    inner_->merge(model);
  }

 private:
  Fault fault_;
  std::shared_ptr<sdk::Adapter> inner_;
};

conformance::AdapterFactory faulty(Fault fault) {
  return [fault] { return std::make_shared<FaultyAdapter>(fault); };
}

void expect_failure(const conformance::CheckResult& r, const std::string& expected) {
  EXPECT_FALSE(r.passed) << r.message;
  EXPECT_NE(r.message.find(expected), std::string::npos) << r.message;
}

TEST(AdapterConformanceFaults, EachCheckCatchesItsFault) {
  ftcore::init_runtime();
  auto model = ftcore::tiny_random_llama(true);
  expect_failure(conformance::check_zero_init_identity(*model, ftcore::tiny_random_llama_logits, faulty(Fault::NonZeroInit)),
                 "an untrained adapter moves the logits by");
  auto first = ftcore::tiny_random_llama(true), second = ftcore::tiny_random_llama(true);
  expect_failure(conformance::check_save_load_round_trip(*first, *second, ftcore::tiny_random_llama_logits, faulty(Fault::ForgetfulLoad)),
                 "the loaded adapter's logits differ");
  model = ftcore::tiny_random_llama(true);
  expect_failure(conformance::check_merge_equivalence(*model, ftcore::tiny_random_llama_logits, faulty(Fault::NoOpMerge)),
                 "after merge() the model still holds model.layers.0.self_attn.q_proj.base_layer.weight");
  model = ftcore::tiny_random_llama(true);
  expect_failure(conformance::check_merge_equivalence(*model, ftcore::tiny_random_llama_logits, faulty(Fault::WrongMerge)),
                 "merged logits differ from the adapter's by");
  model = ftcore::tiny_random_llama(true);
  expect_failure(conformance::check_gradient_flow(*model, ftcore::tiny_random_llama_logits, faulty(Fault::HiddenTrainable)),
                 "model.norm.weight requires grad but is in no group");
  model = ftcore::tiny_random_llama(true);
  const auto dead = conformance::check_gradient_flow(*model, ftcore::tiny_random_llama_logits, faulty(Fault::DeadTensor));
  expect_failure(dead, "model.layers.0.self_attn.v_proj.lora_B.weight (group lora) does not require grad");
  expect_failure(dead, "model.layers.0.self_attn.v_proj.lora_B.weight got no gradient");
  // Misuse is a failed check, not an exception.
  model = ftcore::tiny_random_llama(true);
  const auto thrown = conformance::check_merge_equivalence(*model, ftcore::tiny_random_llama_logits, [] {
    const auto& entry = ftcore::testing::in_tree_entry(sdk::ComponentKind::Adapter, "lora");
    return ftcore::testing::in_tree_registry().create_adapter(
        entry, ftcore::testing::options_for(entry, {{"target_modules", std::vector<std::string>{"q_prj"}}}));
  });
  expect_failure(thrown, "threw: ");
}

}  // namespace

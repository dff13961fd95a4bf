// Reference test of adapter/lora_plus (plugins/adapters/lora/lora_plus_adapter.h)
// against HF PEFT 0.21's create_loraplus_optimizer, which
// tests/reference/loraplus_reference.py runs at test time on tiny random
// Llamas (q/v with ratio 16; all-linear DoRA + rsLoRA with
// loraplus_weight_decay; modules_to_save of a biased o_proj, the RMSNorms and
// embed_tokens).
//
// ftcore's side is built as `ftcore run` builds it: the adapter's groups,
// the trainer's no-decay split (ftcore/param_groups.h), optimizer/adamw from
// the in-tree registry with the recipe's lr and weight_decay, and
// set_base_lr(lr x scheduler factor). For every non-empty PEFT group:
//
//  - the same parameters (by name), in a group of the same name;
//  - the same lr (lr, lr x loraplus_lr_ratio) and weight decay
//    (loraplus_weight_decay, 0 for biases; the optimizer's own weight_decay
//    is ignored by both);
//  - the same lr after a scheduler factor (LambdaLR on PEFT's side).
//
// Relative tolerance 1e-12 on learning rates (a product's rounding order).
#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/param_groups.h"
#include "ftcore/runtime.h"
#include "ftcore/sdk/adapter.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The keys this file's cases use, typed as the ParamSpec declares them.
std::map<std::string, ftcore::sdk::ParamValue> typed_options(const ftcore::RegistryEntry& entry, const json& values) {
  using ftcore::sdk::ParamType;
  std::map<std::string, ftcore::sdk::ParamValue> out;
  for (const auto& [key, v] : values.items()) {
    const ftcore::sdk::Param* p = entry.params->find(key);
    if (!p) throw std::runtime_error(entry.name + " has no option " + key);
    switch (p->type) {
      case ParamType::Bool: out[key] = v.get<bool>(); break;
      case ParamType::Int: out[key] = v.get<int64_t>(); break;
      case ParamType::Float: out[key] = v.get<double>(); break;
      case ParamType::StringList: out[key] = v.get<std::vector<std::string>>(); break;
      default: throw std::runtime_error("loraplus_reference_test: option type of " + key + " not handled");
    }
  }
  return out;
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

void expect_close(double ours, double theirs, const std::string& what) {
  EXPECT_LE(std::abs(ours - theirs), 1e-12 * std::abs(theirs)) << what << ": ftcore " << ours << ", PEFT " << theirs;
}

TEST(LoraPlusReference, GroupsEqualPeftCreateLoraplusOptimizer) {
  ftcore::init_runtime();
  ftcore::testing::TempDir dir;
  const json cases = json::parse(ftcore::testing::run_python(
      "reference/loraplus_reference.py", "peft " + ftcore::testing::shell_quote(dir.path().string())));
  ASSERT_GE(cases.size(), 3u);
  const auto& adapter_entry = ftcore::testing::in_tree_entry(ftcore::sdk::ComponentKind::Adapter, "lora_plus");
  const auto& adamw_entry = ftcore::testing::in_tree_entry(ftcore::sdk::ComponentKind::Optimizer, "adamw");

  for (const std::string name : cases) {
    SCOPED_TRACE("case " + name);
    std::ifstream in(dir / (name + ".json"));
    const json spec = json::parse(in);
    auto model = ftcore::Model::from_pretrained(dir / spec["model"].get<std::string>());
    for (auto& p : model->named_parameters()) p.tensor.set_requires_grad(false);  // what the trainer does
    auto adapter = ftcore::testing::in_tree_registry().create_adapter(
        adapter_entry, ftcore::testing::options_for(adapter_entry, typed_options(adapter_entry, spec["options"])));
    auto groups = ftcore::split_no_decay(adapter->apply(*model));
    auto optimizer = ftcore::testing::in_tree_registry().create_optimizer(
        adamw_entry, groups, ftcore::testing::options_for(adamw_entry, typed_options(adamw_entry, spec["optimizer"])));

    const double lr = spec["lr"].get<double>(), factor = spec["factor"].get<double>();
    std::map<std::string, size_t> ours;  // group name -> index
    for (size_t g = 0; g < optimizer->num_groups(); ++g) ours[optimizer->group_info(g).name] = g;
    size_t peft_groups = 0, params_seen = 0;
    for (const auto& theirs : spec["groups"]) {
      const auto params = theirs["params"].get<std::vector<std::string>>();
      const std::string group = theirs["name"].get<std::string>();
      if (params.empty()) {
        EXPECT_FALSE(ours.count(group)) << group << " is empty in PEFT";
        continue;
      }
      ++peft_groups;
      params_seen += params.size();
      ASSERT_TRUE(ours.count(group)) << "ftcore has no group " << group;
      const size_t g = ours[group];
      EXPECT_EQ(sorted(optimizer->group_info(g).param_names), sorted(params)) << group;
      optimizer->set_base_lr(lr);
      expect_close(optimizer->group_lr(g), theirs["lr"].get<double>(), group + " lr");
      EXPECT_EQ(optimizer->group_info(g).weight_decay, theirs["weight_decay"].get<double>()) << group;
      optimizer->set_base_lr(lr * factor);  // what the trainer passes: base x schedule
      expect_close(optimizer->group_lr(g), theirs["scheduled_lr"].get<double>(), group + " scheduled lr");
      std::cout << "[ measure ] " << name << " " << group << ": " << params.size() << " tensors, lr "
                << theirs["lr"].get<double>() << ", weight_decay " << theirs["weight_decay"].get<double>()
                << " (equal to PEFT's)\n";
    }
    EXPECT_EQ(optimizer->num_groups(), peft_groups);
    size_t ours_total = 0;
    for (size_t g = 0; g < optimizer->num_groups(); ++g) ours_total += optimizer->group_info(g).param_names.size();
    EXPECT_EQ(ours_total, params_seen);
  }
}

// The saved adapter is a plain LoRA (PEFT has no LoRA+ config), so it loads
// wherever adapter/lora's does; a missing ratio is refused by validation.
TEST(LoraPlusReference, SavesPlainLoraAndNeedsTheRatio) {
  ftcore::init_runtime();
  const auto& entry = ftcore::testing::in_tree_entry(ftcore::sdk::ComponentKind::Adapter, "lora_plus");
  const ftcore::sdk::Param* ratio = entry.params->find("loraplus_lr_ratio");
  ASSERT_TRUE(ratio);
  EXPECT_TRUE(ratio->required);
  auto adapter = ftcore::testing::in_tree_registry().create_adapter(
      entry, ftcore::testing::options_for(entry, {{"loraplus_lr_ratio", 16.0}}));
  const json config = json::parse(adapter->peft_config_json());
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["use_dora"], false);
}

}  // namespace

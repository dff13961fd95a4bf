// Reference test of adapter/lora (plugins/adapters/lora) against HF PEFT 0.21,
// which tests/reference/lora_reference.py runs at test time on tiny random
// Llamas (tied and untied embeddings, attention biases). For every case of
// that script (default q/v; all-linear with rsLoRA and with gaussian init;
// target lists with layers_to_transform and exclude_modules; exact paths; a
// regex; modules_to_save of lm_head and embed_tokens, tied and untied; DoRA
// on q/v, all-linear with rsLoRA, biased slots, with dropout, a bf16 base):
//
//  1. selection: the modules ftcore wraps (LoRA and modules_to_save) are the
//     ones PEFT wrapped, in order;
//  2. init: with torch seeded alike, the adapter right after apply() equals
//     PEFT's right after get_peft_model bit for bit (A Kaiming-uniform with
//     |A| <= 1/sqrt(in), or normal(1/r); B zero; DoRA's m = ||W|| per row),
//     and leaves the logits exactly unchanged (DoRA on a bf16 base: m is
//     rounded to bf16 as in PEFT, so nearly, and exactly as PEFT's untrained
//     DoRA moves them);
//  3. PEFT -> ftcore: PEFT's saved adapter (random non-zero A, B; perturbed
//     modules_to_save) loads with load(); logits and the gradients of every
//     trainable tensor (DoRA's m included) after a cross-entropy loss, in
//     train mode with torch seeded alike (dropout draws the same mask), equal PEFT's, fp32, |diff| <= 1e-5
//     (two cases have a bf16 base: logits 1e-5, gradients 5e-3, see kBf16GradTolerance);
//  4. ftcore -> PEFT: after an SGD step, the adapter ftcore saves
//     (safetensors + adapter_config.json) loads in PeftModel.from_pretrained
//     with the same modules and logits (|diff| <= 1e-5);
//  5. merge: logits after merge() equal PEFT's merge_and_unload of the same
//     adapter (|diff| <= 1e-5), and parameter names are HF's again.
//
// Then errors that must name the problem (bad names, shapes, lora_model_dir)
// and dropout acting in training only. Shapes: B rows, T tokens, V vocabulary.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "ftcore/model.h"
#include "ftcore/runtime.h"
#include "ftcore/safetensors.h"
#include "ftcore/sdk/adapter.h"
#include "test_support.h"

namespace fs = std::filesystem;
using ftcore::ForwardInput;
using ftcore::Model;
using ftcore::testing::TempDir;
using nlohmann::json;

namespace {

constexpr int64_t kInitSeed = 4321;     // lora_reference.py's INIT_SEED
constexpr int64_t kForwardSeed = 777;   // lora_reference.py's FORWARD_SEED
constexpr double kTolerance = 1e-5;
// A bf16 base: gradients agree to 1.9e-3 (max |grad| 0.19) although the
// logits are equal: backward reduction order differs in places, and bf16
// shows it. transformers itself, sdpa vs eager attention on the same case,
// differs by 4.5e-3, hence this bound.
constexpr double kBf16GradTolerance = 5e-3;
// DoRA on a bf16 base: m starts as ||W|| rounded to bf16 while the forward
// divides by ||W|| in fp32, so m / n is 1 within 2^-9 and an untrained
// adapter moves the logits a little, in PEFT alike (measured 0.032 on
// logits up to ~4; compared with PEFT's own untrained logits, kTolerance).

struct Inputs {
  at::Tensor input_ids, attention_mask, labels;
};

Inputs read_inputs(const fs::path& file) {
  auto f = ftcore::safetensors::File::open(file);
  return {f->tensor("input_ids").clone(), f->tensor("attention_mask").clone(), f->tensor("labels").clone()};
}

json read_json(const fs::path& file) {
  std::ifstream in(file);
  return json::parse(in);
}

const ftcore::RegistryEntry& lora_entry() {
  return ftcore::testing::in_tree_entry(ftcore::sdk::ComponentKind::Adapter, "lora");
}

// Options from a JSON object of recipe values, typed by the ParamSpec.
ftcore::sdk::Options options_from_json(const json& values) {
  using ftcore::sdk::ParamType;
  std::map<std::string, ftcore::sdk::ParamValue> out;
  for (const auto& [key, v] : values.items()) {
    const ftcore::sdk::Param* p = lora_entry().params->find(key);
    if (!p) throw std::runtime_error("adapter/lora has no option " + key);
    switch (p->type) {
      case ParamType::Bool: out[key] = v.get<bool>(); break;
      case ParamType::Int: out[key] = v.get<int64_t>(); break;
      case ParamType::Float: out[key] = v.get<double>(); break;
      case ParamType::String:
      case ParamType::Enum: out[key] = v.get<std::string>(); break;
      case ParamType::StringList: out[key] = v.get<std::vector<std::string>>(); break;
      case ParamType::IntList: out[key] = v.get<std::vector<int64_t>>(); break;
      default: throw std::runtime_error("option " + key + ": type not handled by the test");
    }
  }
  return ftcore::testing::options_for(lora_entry(), out);
}

std::shared_ptr<ftcore::sdk::Adapter> make_adapter(const json& values) {
  return ftcore::testing::in_tree_registry().create_adapter(lora_entry(), options_from_json(values));
}

std::shared_ptr<Model> load_frozen(const fs::path& dir, const std::string& dtype = "fp32") {
  ftcore::LoadOptions options;
  if (dtype == "bf16") options.dtype = at::kBFloat16;
  auto model = Model::from_pretrained(dir, options);
  for (auto& p : model->named_parameters()) p.tensor.set_requires_grad(false);  // what the trainer does
  return model;
}

at::Tensor forward(Model& model, const Inputs& in) {
  ForwardInput f;
  f.input_ids = in.input_ids;
  f.attention_mask = in.attention_mask;
  return model.forward(f).to(at::kFloat);
}

at::Tensor logits_of(Model& model, const Inputs& in) {
  at::NoGradGuard no_grad;
  model.module().eval();
  return forward(model, in);
}

// max |a - b| over real tokens (padding rows' logits are not compared); a, b [B, T, V].
double max_diff_on_tokens(const at::Tensor& a, const at::Tensor& b, const at::Tensor& mask) {
  at::Tensor keep = mask.ne(0).unsqueeze(-1);
  return (a - b).abs().masked_fill(keep.logical_not(), 0).max().item<double>();
}

void write_adapter(const ftcore::sdk::Adapter& adapter, const fs::path& dir) {
  fs::create_directories(dir);
  ftcore::safetensors::write_file(dir / "adapter_model.safetensors", adapter.save());
  std::ofstream(dir / "adapter_config.json") << adapter.peft_config_json();
}

ftcore::sdk::TensorMap read_adapter(const fs::path& dir) {
  return ftcore::safetensors::File::open(dir / "adapter_model.safetensors")->read_all();
}

std::string strip_suffix(const std::string& s, const std::string& suffix) {
  return s.substr(0, s.size() - suffix.size());
}

// The modules a param group adapts: LoRA slots (from ".lora_A.weight") and
// modules trained in full (everything else, by module path).
std::pair<std::vector<std::string>, std::vector<std::string>> wrapped_modules(const ftcore::sdk::ParamGroupSpec& group) {
  std::vector<std::string> lora, full;
  const std::string a = ".lora_A.weight";
  for (const auto& p : group.params) {
    if (p.name.size() > a.size() && p.name.compare(p.name.size() - a.size(), a.size(), a) == 0) {
      lora.push_back(strip_suffix(p.name, a));
    } else if (p.name.find(".lora_") == std::string::npos) {
      std::string module = p.name.substr(0, p.name.rfind('.'));
      if (std::find(full.begin(), full.end(), module) == full.end()) full.push_back(module);
    }
  }
  std::sort(full.begin(), full.end());
  return {lora, full};
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

struct CaseResult {
  std::vector<std::string> lora, full;
  at::Tensor logits, merged_logits;  // ftcore's, after the SGD step
};

TEST(LoraReference, MatchesPeftOnEveryCase) {
  ftcore::init_runtime();
  TempDir dir;
  const json cases = json::parse(ftcore::testing::run_python(
      "reference/lora_reference.py", "peft " + ftcore::testing::shell_quote(dir.path().string())));
  ASSERT_GE(cases.size(), 10u);
  const Inputs in = read_inputs(dir / "inputs.safetensors");
  std::map<std::string, CaseResult> results;
  double worst_logits = 0, worst_grads = 0;

  for (const std::string name : cases) {
    SCOPED_TRACE("case " + name);
    const fs::path folder = dir / name;
    const json spec = read_json(folder / "case.json");
    auto model = load_frozen(dir / spec["model"].get<std::string>(), spec["dtype"].get<std::string>());
    const at::Tensor base_logits = logits_of(*model, in);
    auto adapter = make_adapter(spec["options"]);
    at::manual_seed(kInitSeed);
    const auto groups = adapter->apply(*model);
    ASSERT_EQ(groups.size(), 1u);

    // 1. The same modules as PEFT.
    const json targets = read_json(folder / "targets.json");
    auto [lora, full] = wrapped_modules(groups[0]);
    EXPECT_EQ(lora, targets["lora"].get<std::vector<std::string>>());
    EXPECT_EQ(full, sorted(targets["modules_to_save"].get<std::vector<std::string>>()));
    for (const auto& p : groups[0].params) EXPECT_TRUE(p.tensor.requires_grad()) << p.name;
    std::set<std::string> trainable;
    for (const auto& p : model->named_parameters())
      if (p.tensor.requires_grad()) trainable.insert(p.name);
    EXPECT_EQ(trainable.size(), groups[0].params.size());
    for (const auto& p : groups[0].params) EXPECT_TRUE(trainable.count(p.name)) << p.name << " not in named_parameters";

    // 2. Initialisation: PEFT's values bit for bit, within Kaiming's bound, logits unchanged.
    const ftcore::sdk::TensorMap initial = adapter->save();
    const auto peft_initial = ftcore::safetensors::File::open(folder / "initial.safetensors")->read_all();
    ASSERT_EQ(initial.tensors.size(), peft_initial.tensors.size());
    const bool gaussian = spec["options"].value("init", std::string("kaiming")) == "gaussian";
    const bool bf16 = spec["dtype"] == "bf16";
    // With a bf16 base A is rounded to bf16 (as PEFT leaves it), which may pass the bound by half an ulp.
    const double bound_slack = bf16 ? 1.0 + 1.0 / 256 : 1.0;
    for (const auto& [tname, t] : initial.tensors) {
      const at::Tensor* theirs = peft_initial.find(tname);
      ASSERT_TRUE(theirs) << tname << " is not in PEFT's initial adapter";
      EXPECT_TRUE(at::equal(t, *theirs)) << tname << " differs from PEFT's initial value";
      if (tname.find(".lora_B.") != std::string::npos) EXPECT_EQ(t.abs().max().item<float>(), 0.0f) << tname;
      if (tname.find(".lora_A.") != std::string::npos && !gaussian)
        EXPECT_LE(t.abs().max().item<double>(), bound_slack / std::sqrt(static_cast<double>(t.size(1)))) << tname;
    }
    const auto reference = ftcore::safetensors::File::open(folder / "reference.safetensors")->read_all();
    const at::Tensor initial_logits = logits_of(*model, in);
    EXPECT_LE(max_diff_on_tokens(initial_logits, *reference.find("initial_logits"), in.attention_mask), kTolerance)
        << "the untrained adapter's logits differ from PEFT's";
    const bool dora = spec["options"].value("use_dora", false);
    if (dora && bf16)
      std::cout << "[ measure ] " << name << ": untrained DoRA on bf16 moves the logits by "
                << max_diff_on_tokens(initial_logits, base_logits, in.attention_mask) << " (PEFT's alike)\n";
    else
      EXPECT_TRUE(at::equal(initial_logits, base_logits)) << "an untrained adapter changed the logits";

    // 3. PEFT's adapter in ftcore: logits and gradients.
    adapter->load(read_adapter(folder / "adapter"));
    model->module().train();
    model->module().zero_grad();
    at::manual_seed(kForwardSeed);
    at::Tensor logits = forward(*model, in);
    const int64_t vocab = logits.size(-1);
    at::cross_entropy_loss(logits.reshape({-1, vocab}), in.labels.reshape({-1}), {}, at::Reduction::Mean, -100)
        .backward();
    const double logit_diff = max_diff_on_tokens(logits.detach(), *reference.find("logits"), in.attention_mask);
    const double adapter_effect = max_diff_on_tokens(logits.detach(), base_logits, in.attention_mask);
    EXPECT_GT(adapter_effect, 1e-2) << "the loaded adapter hardly changes the logits: the comparison would be weak";
    double grad_diff = 0, grad_scale = 0;
    size_t grads_seen = 0;
    for (const auto& p : groups[0].params) {
      const at::Tensor* ref = reference.find("grad." + p.name);
      ASSERT_TRUE(ref) << "PEFT has no gradient for " << p.name;
      ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
      grad_diff = std::max(grad_diff, (p.tensor.grad() - *ref).abs().max().item<double>());
      grad_scale = std::max(grad_scale, ref->abs().max().item<double>());
      ++grads_seen;
    }
    EXPECT_EQ(grads_seen + 2, reference.tensors.size());  // every PEFT gradient has a counterpart
    std::cout << "[ measure ] " << name << ": logits (adapter moves them by up to " << adapter_effect
              << ") max |diff| = " << logit_diff << ", gradients (" << grads_seen
              << " tensors, max |grad| " << grad_scale << ") max |diff| = " << grad_diff << "\n";
    EXPECT_LE(logit_diff, kTolerance);
    EXPECT_LE(grad_diff, bf16 ? kBf16GradTolerance : kTolerance);
    worst_logits = std::max(worst_logits, logit_diff);
    if (!bf16) worst_grads = std::max(worst_grads, grad_diff);

    // An SGD step makes the weights ftcore's own, then save and merge.
    {
      at::NoGradGuard no_grad;
      for (const auto& p : groups[0].params) p.tensor.sub_(p.tensor.grad() * 0.5);
    }
    CaseResult& r = results[name];
    r.lora = lora;
    r.full = full;
    r.logits = logits_of(*model, in);
    write_adapter(*adapter, folder / "ftcore_adapter");
    adapter->merge(*model);
    r.merged_logits = logits_of(*model, in);
    std::set<std::string> names;
    for (const auto& p : model->named_parameters()) {
      EXPECT_EQ(p.name.find(".lora_"), std::string::npos) << p.name << " survives merge()";
      EXPECT_EQ(p.name.find(".base_layer."), std::string::npos) << p.name << " survives merge()";
      names.insert(p.name);
    }
    for (const auto& path : lora) EXPECT_TRUE(names.count(path + ".weight")) << path << ".weight after merge()";
    EXPECT_THROW(adapter->save(), std::exception);  // folded in: nothing left to save
  }
  EXPECT_TRUE(results.count("qv_defaults"));

  // 4 and 5. ftcore's adapters in PEFT: modules, logits, merged logits.
  ftcore::testing::run_python("reference/lora_reference.py",
                              "load " + ftcore::testing::shell_quote(dir.path().string()));
  double worst_saved = 0, worst_merged = 0;
  for (const auto& [name, r] : results) {
    SCOPED_TRACE("case " + name + " (ftcore's adapter in PEFT)");
    const json targets = read_json(dir / name / "targets_of_ftcore.json");
    EXPECT_EQ(r.lora, targets["lora"].get<std::vector<std::string>>());
    EXPECT_EQ(r.full, sorted(targets["modules_to_save"].get<std::vector<std::string>>()));
    const auto peft = ftcore::safetensors::File::open(dir / name / "peft_of_ftcore.safetensors");
    const double saved = max_diff_on_tokens(r.logits, peft->tensor("logits"), in.attention_mask);
    const double merged = max_diff_on_tokens(r.merged_logits, peft->tensor("merged_logits"), in.attention_mask);
    std::cout << "[ measure ] " << name << ": ftcore adapter in PEFT logits max |diff| = " << saved
              << ", merge() vs PEFT merge_and_unload max |diff| = " << merged << "\n";
    EXPECT_LE(saved, kTolerance);
    EXPECT_LE(merged, kTolerance);
    worst_saved = std::max(worst_saved, saved);
    worst_merged = std::max(worst_merged, merged);
  }
  std::cout << "[ measure ] worst over " << results.size() << " cases: logits " << worst_logits
            << ", gradients (fp32) " << worst_grads << ", ftcore adapter in PEFT " << worst_saved << ", merged " << worst_merged << "\n";
}

TEST(LoraReference, ErrorsNameTheProblem) {
  ftcore::init_runtime();
  TempDir dir;
  ftcore::testing::run_python("reference/lora_reference.py",
                              "peft " + ftcore::testing::shell_quote(dir.path().string()) + " qv_defaults dora_qv");
  const fs::path model_dir = dir / "model_tied";
  auto apply_with = [&](const json& options) {
    auto model = load_frozen(model_dir);
    make_adapter(options)->apply(*model);
  };

  std::string e = error_of([&] { apply_with({{"target_modules", {"q_prj", "v_proj"}}}); });
  EXPECT_NE(e.find("\"q_prj\" matches no Linear slot"), std::string::npos) << e;
  EXPECT_NE(e.find("q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head"), std::string::npos) << e;
  e = error_of([&] { apply_with({{"target_modules", {"embed_tokens"}}}); });
  EXPECT_NE(e.find("modules_to_save"), std::string::npos) << e;
  e = error_of([&] { apply_with({{"target_regex", "layers\\.0\\.q_proj"}}); });
  EXPECT_NE(e.find("matches no Linear slot path"), std::string::npos) << e;
  e = error_of([&] { apply_with({{"layers_to_transform", {0, 3}}}); });
  EXPECT_NE(e.find("layer 3 does not exist; the model has 3 layers"), std::string::npos) << e;
  e = error_of([&] { apply_with({{"exclude_modules", {"q_proj", "k_prj"}}}); });
  EXPECT_NE(e.find("exclude_modules: \"k_prj\""), std::string::npos) << e;
  e = error_of([&] { apply_with({{"modules_to_save", {"lm_heads"}}}); });
  EXPECT_NE(e.find("modules_to_save: \"lm_heads\" matches no module"), std::string::npos) << e;
  EXPECT_NE(e.find("embed_tokens"), std::string::npos) << e;
  e = error_of([&] { make_adapter({{"target_modules", {"all-linear"}}, {"layers_to_transform", {0}}}); });
  EXPECT_NE(e.find("layers_to_transform cannot be used with target_modules = [\"all-linear\"]"), std::string::npos) << e;

  // Shapes on load: PEFT's r = 8 adapter into an r = 4 adapter names tensor and both shapes.
  const fs::path peft_adapter = dir / "qv_defaults" / "adapter";
  auto model = load_frozen(model_dir);
  auto r4 = make_adapter({{"r", 4}});
  r4->apply(*model);
  e = error_of([&] { r4->load(read_adapter(peft_adapter)); });
  EXPECT_NE(e.find("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight: [8, 64] in the file, this "
                   "adapter needs [4, 64]"),
            std::string::npos) << e;
  EXPECT_NE(e.find("12 problems"), std::string::npos) << e;  // 3 layers x (q, v) x (A, B)
  // Missing and unexpected tensors.
  model = load_frozen(model_dir);
  auto qk = make_adapter({{"target_modules", {"q_proj", "k_proj"}}});
  qk->apply(*model);
  e = error_of([&] { qk->load(read_adapter(peft_adapter)); });
  EXPECT_NE(e.find("model.layers.2.self_attn.k_proj.lora_B.weight: missing from the file"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.1.self_attn.v_proj.lora_A.weight: unexpected"), std::string::npos) << e;

  // lora_model_dir: the folder is handed to the core; a different r is refused up front.
  auto cont = make_adapter({{"lora_model_dir", peft_adapter.string()}});
  EXPECT_EQ(cont->initial_weights_dir(), peft_adapter.string());
  e = error_of([&] { make_adapter({{"r", 16}, {"lora_model_dir", peft_adapter.string()}}); });
  EXPECT_NE(e.find("r is 8, the recipe says r = 16"), std::string::npos) << e;
  e = error_of([&] { make_adapter({{"lora_model_dir", (dir / "nowhere").string()}}); });
  EXPECT_NE(e.find("is not a folder"), std::string::npos) << e;
  // DoRA and plain LoRA files do not mix, and the error says which is which.
  const fs::path dora_adapter = dir / "dora_qv" / "adapter";
  model = load_frozen(model_dir);
  auto dora = make_adapter({{"use_dora", true}});
  dora->apply(*model);
  e = error_of([&] { dora->load(read_adapter(peft_adapter)); });
  EXPECT_NE(e.find("model.layers.0.self_attn.q_proj.lora_magnitude_vector: missing from the file (use_dora = true, "
                   "and the file is not a DoRA adapter?)"),
            std::string::npos) << e;
  model = load_frozen(model_dir);
  auto plain = make_adapter({});
  plain->apply(*model);
  e = error_of([&] { plain->load(read_adapter(dora_adapter)); });
  EXPECT_NE(e.find("v_proj.lora_magnitude_vector: unexpected; the file is a DoRA adapter: set use_dora = true"),
            std::string::npos) << e;
  e = error_of([&] { make_adapter({{"lora_model_dir", dora_adapter.string()}}); });
  EXPECT_NE(e.find("use_dora is true, the recipe says false"), std::string::npos) << e;
  EXPECT_EQ(make_adapter({{"use_dora", true}, {"lora_model_dir", dora_adapter.string()}})->initial_weights_dir(),
            dora_adapter.string());
  // Calls out of order.
  auto fresh = make_adapter({});
  EXPECT_THROW(fresh->save(), std::exception);
  EXPECT_THROW(fresh->merge(*model), std::exception);
}

// Dropout acts on the LoRA branch in training only; in eval the adapter is deterministic.
TEST(LoraReference, DropoutOnlyInTraining) {
  ftcore::init_runtime();
  TempDir dir;
  ftcore::testing::run_python("reference/lora_reference.py",
                              "peft " + ftcore::testing::shell_quote(dir.path().string()) + " qv_defaults");
  const Inputs in = read_inputs(dir / "inputs.safetensors");
  at::Tensor logits[2];
  for (int with_dropout = 0; with_dropout < 2; ++with_dropout) {
    auto model = load_frozen(dir / "model_tied");
    auto adapter = make_adapter(with_dropout ? json{{"dropout", 0.5}} : json::object());
    adapter->apply(*model);
    adapter->load(read_adapter(dir / "qv_defaults" / "adapter"));
    logits[with_dropout] = logits_of(*model, in);
    if (with_dropout) {
      at::NoGradGuard no_grad;
      model->module().train();
      at::Tensor train_logits = forward(*model, in);
      EXPECT_GT(max_diff_on_tokens(train_logits, logits[1], in.attention_mask), 1e-3);
    }
  }
  EXPECT_TRUE(at::equal(logits[0], logits[1]));
}

}  // namespace

// adapter/relora (relora_adapter.h): options, the jagged lr multiplier,
// magnitude pruning, restarts, and the stacked-cycle PEFT save/load.
//
// Shapes: A [r, in], B [out, r], W [out, in]; a saved slot after K restarts:
// A' [(K + 1) r, in], B' [out, (K + 1) r].
#include "relora_adapter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/nn/init.h>

#include "ftcore/sdk/option_error.h"
#include "ftcore/sdk/option_fields.h"

namespace ftcore::plugins::lora {

namespace {

const std::string kPeftPrefix = "base_model.model.";
const std::string kA = ".lora_A.weight";
const std::string kB = ".lora_B.weight";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// adapter/lora would check lora_model_dir's rank against r; a ReLoRA folder
// holds a multiple of it, so this adapter reads the folder itself.
LoraOptions without_initial_dir(LoraOptions o) {
  o.lora_model_dir.clear();
  return o;
}

// The slot's own floating "weight" parameter (a dense base), else undefined
// (a quantized base: dense_weight() would be a dequantized copy).
at::Tensor own_dense_weight(const sdk::LinearModule& module) {
  for (const auto& item : module.named_parameters(/*recurse=*/false))
    if (item.key() == "weight" && at::isFloatingType(item.value().scalar_type())) return item.value();
  return {};
}

double scaling_of(double alpha, int64_t r, bool rslora) {
  return rslora ? alpha / std::sqrt(static_cast<double>(r)) : alpha / static_cast<double>(r);
}

nlohmann::ordered_json number_json(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return static_cast<int64_t>(v);
  return v;
}

// lora_model_dir for ReLoRA: a PEFT LoRA folder whose rank is a multiple of
// r (one block per merged cycle) with this recipe's scaling.
void check_initial_dir(const std::string& dir_text, const LoraOptions& o) {
  namespace fs = std::filesystem;
  const fs::path dir(dir_text);
  if (!fs::is_directory(dir)) throw std::invalid_argument("lora_model_dir: " + dir.string() + " is not a folder");
  if (!fs::exists(dir / "adapter_model.safetensors"))
    throw std::invalid_argument("lora_model_dir: " + dir.string() +
                                " has no adapter_model.safetensors (a PEFT adapter folder has it and adapter_config.json)");
  const fs::path file = dir / "adapter_config.json";
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::invalid_argument("lora_model_dir: " + file.string() + " is not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& what) { return std::invalid_argument("lora_model_dir: " + file.string() + ": " + what); };
  if (j.value("peft_type", std::string("LORA")) != "LORA") throw fail("peft_type is not LORA");
  if (j.value("use_dora", false)) throw fail("use_dora is true; adapter/relora trains plain LoRA cycles");
  for (const char* key : {"rank_pattern", "alpha_pattern"})
    if (j.contains(key) && j[key].is_object() && !j[key].empty())
      throw fail(std::string(key) + " is set; per-module ranks and alphas are not supported");
  const int64_t r = j.value("r", o.r);
  if (r < o.r || r % o.r != 0)
    throw fail("r is " + std::to_string(r) + "; a ReLoRA adapter holds one block of the recipe's r = " +
               std::to_string(o.r) + " per cycle, so its rank must be a multiple of " + std::to_string(o.r));
  const bool rslora = j.value("use_rslora", false);
  if (rslora != o.use_rslora)
    throw fail(std::string("use_rslora is ") + (rslora ? "true" : "false") + ", the recipe says " +
               (o.use_rslora ? "true" : "false"));
  const double scaling = scaling_of(j.value("lora_alpha", o.alpha), r, rslora);
  if (std::abs(scaling - o.scaling()) > 1e-9 * std::abs(o.scaling()))
    throw fail("lora_alpha gives scaling " + std::to_string(scaling) + " at r = " + std::to_string(r) +
               ", the recipe's alpha and r give " + std::to_string(o.scaling()));
}

}  // namespace

sdk::ParamSpec relora_param_spec() {
  sdk::ParamSpec s = lora_param_spec();
  s.add_int("relora_steps", std::nullopt)
      .make_required()
      .at_least(1)
      .with_doc("Optimizer steps per ReLoRA cycle: after every relora_steps steps (not after the last) B A * scaling "
                "is merged into the base weights, A and B are re-initialised and their optimizer state is pruned.");
  s.add_int("relora_warmup_steps", 10)
      .at_least(0)
      .with_doc("Steps of the lr re-warmup after each restart: the scheduled lr times 0.001 + 0.999 * p / "
                "relora_warmup_steps, p = steps since the restart (Axolotl's jagged schedule).");
  s.add_int("relora_anneal_steps", 1)
      .at_least(0)
      .with_doc("Steps of the linear lr anneal before each restart, p > relora_steps - relora_anneal_steps; "
                "1 (the default) or 0 = none.");
  s.add_float("relora_prune_ratio", 0.9)
      .with_range(0.0, 1.0, false, true)
      .with_doc("At each restart, the fraction of each LoRA optimizer state tensor zeroed, smallest magnitudes "
                "first (Axolotl's magnitude pruning); 0 keeps the state.");
  s.add_bool("relora_cpu_offload", false)
      .with_doc("Merge on the CPU: each weight is copied to the CPU, merged there and copied back (less "
                "accelerator memory at a restart).");
  return s;
}

ReloraOptions relora_options_from(const sdk::Options& options) {
  using O = ReloraOptions;
  const O o = sdk::read_fields<O>(options, {{"relora_steps", &O::relora_steps},
                                            {"relora_warmup_steps", &O::warmup_steps},
                                            {"relora_anneal_steps", &O::anneal_steps},
                                            {"relora_prune_ratio", &O::prune_ratio},
                                            {"relora_cpu_offload", &O::cpu_offload}});
  // use_dora comes with adapter/lora's options when DoRA is built in; a DoRA
  // restart would also have to fold the magnitude vector in.
  if (options.spec() && options.spec()->find("use_dora") && options.get_bool("use_dora"))
    throw sdk::OptionError(
        "adapter/relora: use_dora = true is not supported (ReLoRA restarts merge plain "
        "LoRA cycles); use adapter/lora for DoRA");
  return o;
}

double relora_lr_multiplier(int64_t step, const ReloraOptions& o) {
  const int64_t n = o.relora_steps, w = o.warmup_steps, a = o.anneal_steps;
  if (step < n - a) return 1.0;
  const int64_t p = step % n;
  double t = 1.0;
  if (p < w)
    t = std::min(1.0, static_cast<double>(p) / static_cast<double>(w));
  else if (p > n - a)
    t = std::min(1.0, static_cast<double>(n - p) / static_cast<double>(a));
  return kReloraMinLrScale + (1.0 - kReloraMinLrScale) * t;
}

int64_t magnitude_prune_(at::Tensor& tensor, double ratio) {
  at::NoGradGuard no_grad;
  const int64_t n = tensor.numel();
  if (n >= 2 && ratio > 0.0) {
    const at::Tensor magnitude = tensor.abs();
    const at::Tensor flat = magnitude.reshape({-1}).to(at::kFloat);
    // torch.quantile(flat, ratio): rank = ratio * (n - 1) in fp32, the values
    // at floor and ceil of it (kthvalue is 1-based), lerp'd by the fraction.
    const float rank = static_cast<float>(ratio) * static_cast<float>(n - 1);
    const int64_t below = std::min<int64_t>(static_cast<int64_t>(std::floor(rank)), n - 1);
    const int64_t above = std::min<int64_t>(static_cast<int64_t>(std::ceil(rank)), n - 1);
    const at::Tensor low = std::get<0>(at::kthvalue(flat, below + 1));
    const at::Tensor high = std::get<0>(at::kthvalue(flat, above + 1));
    const at::Tensor threshold = at::lerp(low, high, rank - std::floor(rank)).to(tensor.scalar_type());
    tensor.mul_(magnitude.gt(threshold).to(tensor.scalar_type()));
  }
  return tensor.eq(0).sum().item<int64_t>();
}

ReloraAdapter::ReloraAdapter(LoraOptions lora, ReloraOptions relora)
    : LoraAdapter(without_initial_dir(lora)), lora_(std::move(lora)), relora_(relora) {
  if (relora_.relora_steps < 1)
    throw sdk::OptionError("relora_steps must be >= 1, got " + std::to_string(relora_.relora_steps));
  if (relora_.warmup_steps < 0 || relora_.warmup_steps > relora_.relora_steps)
    throw sdk::OptionError("relora_warmup_steps must be in [0, relora_steps = " + std::to_string(relora_.relora_steps) +
                           "], got " + std::to_string(relora_.warmup_steps));
  if (relora_.anneal_steps < 0 || relora_.anneal_steps > relora_.relora_steps)
    throw sdk::OptionError("relora_anneal_steps must be in [0, relora_steps = " + std::to_string(relora_.relora_steps) +
                           "], got " + std::to_string(relora_.anneal_steps));
  if (!(relora_.prune_ratio >= 0.0 && relora_.prune_ratio < 1.0))
    throw sdk::OptionError("relora_prune_ratio must be in [0, 1), got " + std::to_string(relora_.prune_ratio));
  if (!lora_.lora_model_dir.empty()) {
    check_initial_dir(lora_.lora_model_dir, lora_);
    initial_dir_ = lora_.lora_model_dir;
  }
}

std::vector<sdk::ParamGroupSpec> ReloraAdapter::apply(sdk::ModelView& model) {
  std::vector<sdk::ParamGroupSpec> groups = LoraAdapter::apply(model);
  if (adapted_parameter_count() > 0)
    throw std::invalid_argument("adapter/relora restarts LoRA on Linear slots only; target_parameters (or all-linear "
                                "on an MoE model, which adds the routers and experts) needs adapter/lora, or list "
                                "target_modules by name");
  // Each tensor under the first name the model gives it: a tied lm_head's
  // base weight shows up as model.embed_tokens.weight.
  std::unordered_map<const void*, std::string> owner;
  for (const auto& p : model.named_parameters()) owner.emplace(p.tensor.unsafeGetTensorImpl(), p.name);
  for (const auto& group : groups) {
    for (const auto& p : group.params) {
      if (!ends_with(p.name, kA)) continue;
      const std::string path = p.name.substr(0, p.name.size() - kA.size());
      auto module = std::dynamic_pointer_cast<LoraLinear>(model.linear(path));
      if (!module) throw std::logic_error("adapter/relora: " + path + " holds no LoRA layer after apply()");
      at::Tensor weight = own_dense_weight(*module->base());
      // A quantized base has no dense weight: each restart dequantizes,
      // merges and re-quantizes it (what Axolotl's ReLoRA does for 4-bit).
      if (!weight.defined() && !module->base()->can_set_dense_weight())
        throw std::invalid_argument("adapter/relora: " + path +
                                    " has a quantized base that cannot be re-quantized without calibration "
                                    "activations (GPTQ); ReLoRA needs a dense, nf4 or fp4 base");
      const auto it = weight.defined() ? owner.find(weight.unsafeGetTensorImpl()) : owner.end();
      if (it != owner.end() && it->second != path + ".base_layer.weight")
        throw std::invalid_argument("adapter/relora: " + path + " shares its weight with " + it->second +
                                    " (tied embeddings); a restart's merge would change both. Leave it out of "
                                    "the targets (e.g. exclude_modules = [\"" + path + "\"])");
      slots_.push_back({path, std::move(module), std::move(weight), {}, {}});
    }
  }
  return groups;
}

void ReloraAdapter::merge(sdk::ModelView& model) {
  LoraAdapter::merge(model);
  slots_.clear();  // the slots now hold dense Linears; nothing left to restart
  folded_ = true;
}

void ReloraAdapter::merge_cycle(Slot& slot, const at::Tensor& a, const at::Tensor& b) {
  at::NoGradGuard no_grad;
  const double scaling = slot.module->scaling();
  const auto& base = slot.module->base();
  const at::Tensor weight = slot.weight.defined() ? slot.weight : base->dense_weight();  // dequantized
  at::Tensor merged = relora_.cpu_offload
                          ? merged_weight(weight.to(at::kCPU), a.to(at::kCPU), b.to(at::kCPU), scaling)
                          : merged_weight(weight, a.to(weight.device()), b.to(weight.device()), scaling);
  if (slot.weight.defined())
    slot.weight.copy_(merged);
  else
    base->set_dense_weight(merged.to(weight.device(), weight.scalar_type()));
  slot.past_a.push_back(a.detach().to(at::kCPU, at::kFloat).clone());
  slot.past_b.push_back(b.detach().to(at::kCPU, at::kFloat).clone());
}

// PEFT's reset_lora_parameters, drawn on the CPU generator as apply() draws.
void ReloraAdapter::reinitialise(Slot& slot) {
  at::NoGradGuard no_grad;
  at::Tensor fresh = at::empty(slot.module->lora_a().sizes(), at::TensorOptions().dtype(at::kFloat));
  if (lora_.init == LoraInit::Gaussian)
    fresh.normal_(0.0, 1.0 / static_cast<double>(lora_.r));
  else
    torch::nn::init::kaiming_uniform_(fresh, std::sqrt(5.0));
  slot.module->lora_a().copy_(fresh);
  slot.module->lora_b().zero_();
}

ReloraAdapter::PruneCount ReloraAdapter::prune_optimizer_state(sdk::Optimizer& optimizer) const {
  PruneCount count;
  if (relora_.prune_ratio <= 0.0) return count;
  std::unordered_set<std::string> factors;
  for (const auto& slot : slots_) {
    factors.insert(slot.path + kA);
    factors.insert(slot.path + kB);
  }
  sdk::TensorMap state = optimizer.state_by_name();  // "<param name>.<slot>"
  for (auto& [name, tensor] : state.tensors) {
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos || !factors.count(name.substr(0, dot))) continue;
    if (!at::isFloatingType(tensor.scalar_type()) || tensor.numel() < 2) continue;  // step counts
    at::Tensor pruned = tensor.detach().clone();
    count.zeroed += magnitude_prune_(pruned, relora_.prune_ratio);
    count.total += pruned.numel();
    ++count.tensors;
    tensor = pruned;
  }
  optimizer.load_state_by_name(state, sdk::StateConversion::Convert);
  return count;
}

void ReloraAdapter::restart(int64_t step, sdk::Optimizer* optimizer) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (auto& slot : slots_) {
    merge_cycle(slot, slot.module->lora_a(), slot.module->lora_b());
    reinitialise(slot);
  }
  ++merged_cycles_;
  const auto merged = clock::now();
  PruneCount pruned;
  if (optimizer)
    pruned = prune_optimizer_state(*optimizer);
  else
    spdlog::warn("adapter/relora: restart without an optimizer; its state is not pruned");
  const auto end = clock::now();
  auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  spdlog::info("adapter/relora: restart {} after step {}: {} slots merged{} and re-initialised; optimizer state "
               "pruned, {} of {} values in {} tensors now zero ({:.1f}%); {:.3f} s (merge + re-init {:.3f} s, "
               "prune {:.3f} s)",
               merged_cycles_, step, slots_.size(), relora_.cpu_offload ? " on the CPU" : "", pruned.zeroed,
               pruned.total, pruned.tensors, 100.0 * pruned.zeroed / std::max<double>(1.0, pruned.total),
               seconds(start, end), seconds(start, merged), seconds(merged, end));
}

void ReloraAdapter::on_event(const sdk::TrainerEvent& event, sdk::ModelView& model) {
  (void)model;  // the slots were found at apply()
  if (event.type != sdk::TrainerEvent::Type::StepEnd) return;
  if (event.step <= 0 || event.step % relora_.relora_steps != 0) return;
  if (event.total_steps > 0 && event.step >= event.total_steps) return;  // nothing left to train
  if (folded_) throw std::logic_error("adapter/relora: a restart after merge(): the adapter is folded in");
  restart(event.step, event.optimizer);
}

sdk::TensorMap ReloraAdapter::save() const {
  sdk::TensorMap out = LoraAdapter::save();
  if (merged_cycles_ == 0) return out;
  std::unordered_map<std::string, const Slot*> by_name;
  for (const auto& slot : slots_) {
    by_name[kPeftPrefix + slot.path + kA] = &slot;
    by_name[kPeftPrefix + slot.path + kB] = &slot;
  }
  for (auto& [name, tensor] : out.tensors) {
    const auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    const bool is_a = ends_with(name, kA);
    std::vector<at::Tensor> blocks = is_a ? it->second->past_a : it->second->past_b;
    blocks.push_back(tensor);
    tensor = at::cat(blocks, is_a ? 0 : 1).contiguous();
  }
  return out;
}

std::string ReloraAdapter::peft_config_json() const {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(LoraAdapter::peft_config_json());
  if (merged_cycles_ > 0) {
    const int64_t rank = (merged_cycles_ + 1) * lora_.r;
    const double scaling = lora_.scaling();
    j["r"] = rank;
    j["lora_alpha"] = number_json(lora_.use_rslora ? scaling * std::sqrt(static_cast<double>(rank))
                                                   : scaling * static_cast<double>(rank));
  }
  return j.dump(2) + "\n";
}

void ReloraAdapter::load(const sdk::TensorMap& weights) {
  const int64_t r = lora_.r;
  // Cycles in the file per slot: A [m r, in] with B [out, m r]; anything
  // else is left to adapter/lora's checks, which name the tensor.
  std::map<std::string, at::Tensor> live;  // PEFT name -> the last cycle's block
  std::vector<int64_t> cycles(slots_.size(), 1);
  for (size_t i = 0; i < slots_.size(); ++i) {
    const at::Tensor* a = weights.find(kPeftPrefix + slots_[i].path + kA);
    const at::Tensor* b = weights.find(kPeftPrefix + slots_[i].path + kB);
    if (!a || !b || a->dim() != 2 || b->dim() != 2 || a->size(0) != b->size(1) || a->size(0) % r != 0 ||
        a->size(0) <= r)
      continue;
    cycles[i] = a->size(0) / r;
    live[kPeftPrefix + slots_[i].path + kA] = a->narrow(0, a->size(0) - r, r);
    live[kPeftPrefix + slots_[i].path + kB] = b->narrow(1, b->size(1) - r, r);
  }
  const int64_t m = cycles.empty() ? 1 : cycles.front();
  for (size_t i = 0; i < cycles.size(); ++i)
    if (cycles[i] != m)
      throw std::runtime_error("adapter/relora: the adapter holds " + std::to_string(m) + " cycles of rank " +
                               std::to_string(r) + " for " + slots_.front().path + " but " +
                               std::to_string(cycles[i]) + " for " + slots_[i].path);
  // Cycles this model has merged already must be the file's first ones.
  if (m - 1 < merged_cycles_)
    throw std::runtime_error("adapter/relora: the adapter holds " + std::to_string(m - 1) +
                             " merged cycles, this model's base has " + std::to_string(merged_cycles_) +
                             " merged already; it is not a continuation of this run");
  for (const auto& slot : slots_) {
    const at::Tensor& a = *weights.find(kPeftPrefix + slot.path + kA);
    const at::Tensor& b = *weights.find(kPeftPrefix + slot.path + kB);
    for (int64_t k = 0; k < merged_cycles_; ++k)
      if (!at::equal(a.narrow(0, k * r, r).to(at::kFloat), slot.past_a[k]) ||
          !at::equal(b.narrow(1, k * r, r).to(at::kFloat), slot.past_b[k]))
        throw std::runtime_error("adapter/relora: cycle " + std::to_string(k + 1) + " of " + slot.path +
                                 " differs from the one merged into this model's base already");
  }
  sdk::TensorMap current;
  current.metadata = weights.metadata;
  for (const auto& [name, tensor] : weights.tensors) {
    const auto it = live.find(name);
    current.add(name, it == live.end() ? tensor : it->second);
  }
  LoraAdapter::load(current);  // checks names, shapes and dtypes; copies the live cycle
  for (auto& slot : slots_) {
    const at::Tensor& a = *weights.find(kPeftPrefix + slot.path + kA);
    const at::Tensor& b = *weights.find(kPeftPrefix + slot.path + kB);
    // Contiguous, as the run's parameters were: the same matmul, the same rounding.
    for (int64_t k = merged_cycles_; k < m - 1; ++k)
      merge_cycle(slot, a.narrow(0, k * r, r).contiguous(), b.narrow(1, k * r, r).contiguous());
  }
  if (m - 1 > merged_cycles_)
    spdlog::info("adapter/relora: merged {} earlier cycle(s) from the adapter file into the base weights",
                 m - 1 - merged_cycles_);
  merged_cycles_ = m - 1;
}

}  // namespace ftcore::plugins::lora

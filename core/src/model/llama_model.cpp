// ftcore::Model (model.h): one forward through the decoder — sequence ids,
// positions, rotary tables and masks computed once and shared by every
// layer; optional per-layer checkpointing; the KV cache — and the Linear
// slot registry that sdk::ModelView exposes to adapters and quantizers.
//
// Shapes: B batch, T new tokens, C hidden, V vocabulary.
#include <cmath>
#include <set>
#include <unordered_set>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include "ftcore/model.h"
#include "ftcore/model_layers.h"
#include "ftcore/safetensors.h"

namespace ftcore {

namespace {


// Where a Linear slot lives: the module it is registered in, under which
// name, and the member that holds it.
struct SlotRef {
  torch::nn::Module* owner = nullptr;
  std::string name;
  std::shared_ptr<sdk::LinearModule>* holder = nullptr;
};

SlotRef find_slot(model::CausalLM& net, const std::string& path) {
  if (path == "lm_head") return {&net, "lm_head", &net.lm_head};
  // model.layers.<i>.(self_attn|mlp).<name>
  const std::string prefix = "model.layers.";
  auto bad = [&]() -> ModelError {
    return ModelError("no Linear slot '" + path + "' (slots look like model.layers.0.self_attn.q_proj, " +
                      "model.layers.0.mlp.down_proj, lm_head; see linear_paths())");
  };
  if (path.rfind(prefix, 0) != 0) throw bad();
  size_t dot = path.find('.', prefix.size());
  if (dot == std::string::npos) throw bad();
  const std::string index_text = path.substr(prefix.size(), dot - prefix.size());
  if (index_text.empty() || index_text.find_first_not_of("0123456789") != std::string::npos) throw bad();
  const size_t index = std::stoul(index_text);
  if (index >= net.model->layers.size()) throw bad();
  model::DecoderLayer& layer = *net.model->layers[index];
  const std::string rest = path.substr(dot + 1);
  model::Attention& a = *layer.self_attn;
  // Fused families (Phi-3) leave q/k/v_proj and gate/up_proj null, the others qkv_proj and gate_up_proj.
  for (auto [name, holder] : {std::pair{"q_proj", &a.q_proj}, {"k_proj", &a.k_proj}, {"v_proj", &a.v_proj},
                              {"qkv_proj", &a.qkv_proj}, {"o_proj", &a.o_proj}})
    if (*holder && rest == std::string("self_attn.") + name) return {&a, name, holder};
  if (!layer.mlp) throw bad();  // a sparse MoE layer: its router and experts are not Linear slots
  model::Mlp& m = *layer.mlp;
  for (auto [name, holder] : {std::pair{"gate_proj", &m.gate_proj}, {"up_proj", &m.up_proj},
                              {"gate_up_proj", &m.gate_up_proj}, {"down_proj", &m.down_proj}})
    if (*holder && rest == std::string("mlp.") + name) return {&m, name, holder};
  throw bad();
}

std::string shape_text(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// Lists up to `limit` items and how many more there were.
std::string list_some(const std::vector<std::string>& items, size_t limit = 12) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < limit; ++i) s += "\n  " + items[i];
  if (items.size() > limit) s += "\n  ... and " + std::to_string(items.size() - limit) + " more";
  return s;
}

// Tensors some checkpoints carry that the model derives itself.
bool is_derived_tensor(const std::string& name, const ModelConfig& config) {
  const std::string inv_freq = "rotary_emb.inv_freq";
  if (name.size() >= inv_freq.size() && name.compare(name.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0)
    return true;
  return config.tie_word_embeddings && name == "lm_head.weight";
}

}  // namespace

Model::Model(ModelConfig config, const c10::TensorOptions& options) : config_(std::move(config)) {
  if (config_.layer_windows.empty()) config_.layer_windows.assign(config_.num_layers, 0);
  if (static_cast<int64_t>(config_.layer_windows.size()) != config_.num_layers)
    throw ModelError("layer_windows lists " + std::to_string(config_.layer_windows.size()) + " layers, the model has " +
                     std::to_string(config_.num_layers));
  if (!config_.sparse_layers.empty() && static_cast<int64_t>(config_.sparse_layers.size()) != config_.num_layers)
    throw ModelError("sparse_layers lists " + std::to_string(config_.sparse_layers.size()) + " layers, the model has " +
                     std::to_string(config_.num_layers));
  if (!config_.layer_uses_rope.empty() && static_cast<int64_t>(config_.layer_uses_rope.size()) != config_.num_layers)
    throw ModelError("layer_uses_rope lists " + std::to_string(config_.layer_uses_rope.size()) +
                     " layers, the model has " + std::to_string(config_.num_layers));
  net_ = std::make_shared<model::CausalLM>(config_, options);
  rope_ = std::make_shared<const model::RotaryEmbedding>(config_, config_.rope);
  if (config_.sliding_rope) sliding_rope_ = std::make_shared<const model::RotaryEmbedding>(config_, *config_.sliding_rope);
}

at::Tensor Model::embed(const at::Tensor& ids) const {
  at::Tensor x = net_->model->embed_tokens->forward(ids);  // [B, T, C]
  if (config_.embedding_multiplier == 1.0) return x;
  if (config_.round_embedding_multiplier)  // Gemma: sqrt(C) as a tensor of the activations' dtype
    return x * at::scalar_tensor(config_.embedding_multiplier, x.options().dtype(at::kFloat)).to(x.scalar_type());
  return x * config_.embedding_multiplier;
}

model::AttentionInputs Model::attention_inputs(const at::Tensor& seq, const at::Tensor& past,
                                               const at::Tensor& positions) const {
  model::AttentionInputs inputs;
  std::tie(inputs.cos, inputs.sin) = rope_->cos_sin(positions, dtype());
  if (sliding_rope_) std::tie(inputs.sliding_cos, inputs.sliding_sin) = sliding_rope_->cos_sin(positions, dtype());
  for (int64_t window : std::set<int64_t>(config_.layer_windows.begin(), config_.layer_windows.end()))
    inputs.masks[window] = model::build_attention_mask(seq, past, window);
  return inputs;
}

Model::~Model() = default;

c10::ScalarType Model::dtype() const { return net_->model->embed_tokens->weight().scalar_type(); }
c10::Device Model::device() const { return net_->model->embed_tokens->weight().device(); }
torch::nn::Module& Model::module() { return *net_; }

at::Tensor Model::forward_hidden(const ForwardInput& in) {
  TORCH_CHECK(in.input_ids.defined() && in.input_ids.dim() == 2, "input_ids must be [B, T]");
  TORCH_CHECK(!at::isFloatingType(in.input_ids.scalar_type()), "input_ids must be integers, got ",
              in.input_ids.scalar_type());
  const at::Tensor ids = in.input_ids.to(device(), at::kLong);
  const int64_t batch = ids.size(0), tokens = ids.size(1);
  KVCache* cache = in.cache;
  const at::Tensor seq = model::resolve_sequence_ids(ids, in.attention_mask, in.sequence_ids);
  const at::Tensor past = cache && !cache->empty() ? cache->sequence_ids() : at::Tensor();
  if (past.defined())
    TORCH_CHECK(past.size(0) == batch, "the KV cache holds ", past.size(0), " rows, input_ids has ", batch);

  at::Tensor positions;
  if (in.position_ids.defined()) {
    TORCH_CHECK(in.position_ids.sizes() == ids.sizes(), "position_ids must be [B, T] like input_ids ", ids.sizes(),
                ", got ", in.position_ids.sizes());
    positions = in.position_ids.to(device(), at::kLong);
  } else {
    positions = model::default_positions(seq, past);
  }
  model::AttentionInputs inputs = attention_inputs(seq, past, positions);
  if (cache)
    cache->reserve(config_.num_layers, batch, tokens, config_.num_kv_heads, config_.head_dim,
                   at::TensorOptions().dtype(dtype()).device(device()));
  at::Tensor x = embed(ids);  // [B, T, C]
  if (neftune_alpha_ > 0.0 && net_->is_training() && at::GradMode::is_enabled() && !cache) {
    const double magnitude = neftune_alpha_ / std::sqrt(static_cast<double>(x.size(1) * x.size(2)));
    x = x + at::empty_like(x).uniform_(-magnitude, magnitude);
  }
  const bool checkpoint = checkpointing_ && !cache && at::GradMode::is_enabled();
  // A checkpointed layer's forward runs without grad (and again in backward), so
  // the router logits it would record could not carry the aux loss's gradient.
  if (checkpoint && in.router_logits)
    throw ModelError("gradient checkpointing with the router's load-balancing loss is not supported yet "
                     "(turn off gradient_checkpointing or output_router_logits)");
  inputs.router_logits = in.router_logits;
  for (const auto& layer : net_->model->layers)
    x = checkpoint ? model::checkpoint_layer(layer, x, inputs) : layer->forward(x, inputs, cache);
  if (cache) cache->commit(seq);
  return net_->model->norm->forward(x);
}

at::Tensor Model::compute_logits(const at::Tensor& hidden) {
  RECORD_USER_SCOPE("ftcore::lm_head");
  at::Tensor logits = net_->lm_head->forward(hidden);
  if (config_.logits_divisor != 1.0) logits = logits / config_.logits_divisor;  // Granite
  if (config_.final_logit_softcap > 0)  // Gemma: cap * tanh(logits / cap)
    logits = at::tanh(logits / config_.final_logit_softcap) * config_.final_logit_softcap;
  return logits;
}

at::Tensor Model::forward(const ForwardInput& in) {
  at::Tensor hidden = forward_hidden(in);
  const int64_t tokens = hidden.size(1);
  TORCH_CHECK(in.logits_to_keep >= 0, "logits_to_keep must be >= 0, got ", in.logits_to_keep);
  if (in.logits_to_keep > 0 && in.logits_to_keep < tokens)
    hidden = hidden.narrow(1, tokens - in.logits_to_keep, in.logits_to_keep);
  return compute_logits(hidden);  // [B, T', V]
}

std::vector<std::string> Model::linear_paths() const {
  std::vector<std::string> paths;
  const std::vector<std::string> attention = config_.fused_qkv ? std::vector<std::string>{"o_proj", "qkv_proj"}
                                                                 : std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"};
  const std::vector<std::string> mlp = config_.fused_gate_up ? std::vector<std::string>{"gate_up_proj", "down_proj"}
                                                             : std::vector<std::string>{"gate_proj", "up_proj", "down_proj"};
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string layer = "model.layers." + std::to_string(i);
    for (const auto& name : attention) paths.push_back(layer + ".self_attn." + name);
    if (config_.sparse_layers.empty() || !config_.sparse_layers[i])
      for (const auto& name : mlp) paths.push_back(layer + ".mlp." + name);
  }
  paths.push_back("lm_head");
  return paths;
}

std::shared_ptr<sdk::LinearModule> Model::linear(const std::string& path) const { return *find_slot(*net_, path).holder; }

void Model::replace_linear(const std::string& path, std::shared_ptr<sdk::LinearModule> module) {
  SlotRef slot = find_slot(*net_, path);
  if (!module) throw ModelError("replace_linear('" + path + "'): the new module is null");
  const auto& current = *slot.holder;
  if (module->in_features() != current->in_features() || module->out_features() != current->out_features())
    throw ModelError("replace_linear('" + path + "'): the slot is " + std::to_string(current->in_features()) + " -> " +
                     std::to_string(current->out_features()) + ", the new module " +
                     std::to_string(module->in_features()) + " -> " + std::to_string(module->out_features()));
  slot.owner->replace_module(slot.name, module);
  *slot.holder = std::move(module);
}

int64_t Model::keep_frozen_linear_weights_in(at::ScalarType dtype) {
  int64_t freed = 0;
  for (const auto& module : net_->modules(/*include_self=*/false))
    if (auto* dense = dynamic_cast<model::DenseLinear*>(module.get())) freed += dense->keep_frozen_weight_in(dtype);
  return freed;
}

std::vector<sdk::NamedParameter> Model::named_parameters() const {
  std::vector<sdk::NamedParameter> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : net_->named_parameters(/*recurse=*/true))
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.push_back({item.key(), item.value()});
  return out;
}

void Model::load_weights(const std::vector<std::pair<std::string, at::Tensor>>& stored, const std::string& origin) {
  const auto tensors = config_.is_moe() ? model::fuse_expert_tensors(stored, config_, origin) : stored;
  std::map<std::string, at::Tensor> expected;
  for (const auto& p : named_parameters()) expected.emplace(p.name, p.tensor);
  std::vector<std::string> unexpected, mismatched, missing;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (parameter, stored)
  std::set<std::string> found;
  for (const auto& [name, stored] : tensors) {
    auto it = expected.find(name);
    if (it == expected.end()) {
      if (!is_derived_tensor(name, config_)) unexpected.push_back(name);
      continue;
    }
    if (!found.insert(name).second) continue;
    if (stored.sizes() != it->second.sizes()) {
      mismatched.push_back(name + ": " + shape_text(stored.sizes()) + " in the checkpoint, the config needs " +
                           shape_text(it->second.sizes()));
      continue;
    }
    if (!at::isFloatingType(stored.scalar_type())) {
      mismatched.push_back(name + ": stored as " + std::string(c10::toString(stored.scalar_type())) +
                           ", expected a floating-point tensor");
      continue;
    }
    copies.emplace_back(it->second, stored);
  }
  for (const auto& [name, param] : expected)
    if (!found.count(name)) missing.push_back(name);
  std::string problems;
  if (!missing.empty()) problems += "\nmissing tensors (" + std::to_string(missing.size()) + "):" + list_some(missing);
  if (!mismatched.empty())
    problems += "\nshape or dtype mismatches (" + std::to_string(mismatched.size()) + "):" + list_some(mismatched);
  if (!unexpected.empty())
    problems += "\nunexpected tensors (" + std::to_string(unexpected.size()) + "), not part of a " +
                config_.architecture + " with this config:" + list_some(unexpected);
  if (!problems.empty()) throw ModelError(origin + ": the weights do not fit the config:" + problems);
  at::NoGradGuard no_grad;
  for (auto& [param, stored] : copies) {
    param.copy_(stored);
    safetensors::release_mapped_pages(stored);  // the file's pages need not stay beside the copy
  }
}

}  // namespace ftcore

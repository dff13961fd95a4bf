// ftcore::Model's adaptable parameters (sdk::ModelView): each sparse
// layer's router weight and expert stacks, by HF parameter name, and the
// transforms an adapter puts in front of them (model_moe.h).
//
// The transforms are held by the router / experts modules but not
// registered as their submodules, so named_parameters() keeps transformers'
// names (an adapter lists its own tensors in its parameter groups).
#include <ATen/ATen.h>

#include "ftcore/model.h"
#include "ftcore/model_layers.h"

namespace ftcore {

namespace {

// The module member a parameter path names: the tensor and its transform slot.
struct ParameterRef {
  at::Tensor tensor;
  std::shared_ptr<sdk::ParameterTransform>* transform = nullptr;
};

ParameterRef find_parameter(model::CausalLM& net, const std::string& path) {
  const std::string prefix = "model.layers.";
  const size_t dot = path.rfind(prefix, 0) == 0 ? path.find('.', prefix.size()) : std::string::npos;
  const std::string index = dot == std::string::npos ? "" : path.substr(prefix.size(), dot - prefix.size());
  if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos) {
    const size_t i = std::stoul(index);
    if (i < net.model->layers.size() && net.model->layers[i]->moe) {
      model::SparseMoeBlock& moe = *net.model->layers[i]->moe;
      const std::string rest = path.substr(dot + 1);
      if (rest == "mlp.gate.weight") return {moe.gate->weight(), &moe.gate->weight_transform};
      if (rest == "mlp.experts.gate_up_proj") return {moe.experts->gate_up_proj, &moe.experts->gate_up_transform};
      if (rest == "mlp.experts.down_proj") return {moe.experts->down_proj, &moe.experts->down_transform};
    }
  }
  throw ModelError("no adaptable parameter '" + path + "' (they are the sparse layers' model.layers.N.mlp.gate.weight, "
                   "mlp.experts.gate_up_proj and mlp.experts.down_proj; see adaptable_parameter_paths())");
}

}  // namespace

// In the order transformers registers them in the sparse block, which is the
// order PEFT draws their LoRA initialisation in: MixtralSparseMoeBlock makes
// its router (gate) first, Qwen3MoeSparseMoeBlock its experts first.
std::vector<std::string> Model::adaptable_parameter_paths() const {
  static const std::vector<const char*> router_first = {"gate.weight", "experts.gate_up_proj", "experts.down_proj"};
  static const std::vector<const char*> experts_first = {"experts.gate_up_proj", "experts.down_proj", "gate.weight"};
  const auto& order = config_.architecture == "Qwen3MoeForCausalLM" ? experts_first : router_first;
  std::vector<std::string> paths;
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    if (config_.sparse_layers.empty() || !config_.sparse_layers[i]) continue;
    const std::string layer = "model.layers." + std::to_string(i) + ".mlp.";
    for (const char* name : order) paths.push_back(layer + name);
  }
  return paths;
}

at::Tensor Model::adaptable_parameter(const std::string& path) const { return find_parameter(*net_, path).tensor; }

void Model::set_parameter_transform(const std::string& path, std::shared_ptr<sdk::ParameterTransform> transform) {
  *find_parameter(*net_, path).transform = std::move(transform);
}

}  // namespace ftcore

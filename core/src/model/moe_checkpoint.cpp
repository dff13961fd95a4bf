// The per-expert checkpoint layout -> transformers 5's fused expert tensors
// (model_moe.h), as transformers' conversion mapping does at load
// (conversion_mapping.py: "mixtral", "qwen2_moe" used by qwen3_moe):
//
//   Mixtral    model.layers.N.block_sparse_moe.experts.E.w1 / w3 / w2.weight, block_sparse_moe.gate.weight
//   Qwen3-MoE  model.layers.N.mlp.experts.E.gate_proj / up_proj / down_proj.weight
//     -> model.layers.N.mlp.experts.gate_up_proj [E, 2F, C] = cat(stack(gate_e), stack(up_e)) on dim 1
//        model.layers.N.mlp.experts.down_proj    [E, C, F]  = stack(down_e)
//
// That per-expert layout is what the hub's checkpoints hold and also what
// transformers 5's save_pretrained writes (it reverses the mapping);
// folders with the fused names load as they are.
#include <map>

#include <ATen/ATen.h>

#include "ftcore/model.h"
#include "ftcore/model_moe.h"
#include "ftcore/safetensors.h"

namespace ftcore::model {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// One layer's per-expert tensors: role ("gate", "up", "down") -> expert -> tensor.
using ExpertParts = std::map<std::string, std::map<int64_t, at::Tensor>>;

// "model.layers.3.mlp.experts.5.w1.weight" -> ("model.layers.3.mlp.experts", 5, "gate"); false if not an expert tensor.
bool parse_expert_name(const std::string& name, std::string& block, int64_t& expert, std::string& role) {
  const std::string marker = ".mlp.experts.";
  const size_t at = name.find(marker);
  if (at == std::string::npos || !starts_with(name, "model.layers.")) return false;
  const size_t digits = at + marker.size();
  size_t end = digits;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == digits || end >= name.size() || name[end] != '.') return false;
  static const std::map<std::string, std::string> roles = {
      {"w1.weight", "gate"}, {"w3.weight", "up"}, {"w2.weight", "down"},
      {"gate_proj.weight", "gate"}, {"up_proj.weight", "up"}, {"down_proj.weight", "down"}};
  auto it = roles.find(name.substr(end + 1));
  if (it == roles.end()) return false;
  block = name.substr(0, at + marker.size() - 1);
  expert = std::stoll(name.substr(digits, end - digits));
  role = it->second;
  return true;
}

at::Tensor stack_experts(const std::map<int64_t, at::Tensor>& parts, int64_t num_experts, const std::string& what) {
  std::vector<at::Tensor> ordered;
  for (int64_t e = 0; e < num_experts; ++e) {
    auto it = parts.find(e);
    if (it == parts.end())
      throw ModelError(what + ": expert " + std::to_string(e) + " is missing (the config has " +
                       std::to_string(num_experts) + " experts)");
    ordered.push_back(it->second);
  }
  if (static_cast<int64_t>(parts.size()) != num_experts)
    throw ModelError(what + ": " + std::to_string(parts.size()) + " experts stored, the config has " +
                     std::to_string(num_experts));
  return at::stack(ordered);
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> fuse_expert_tensors(
    const std::vector<std::pair<std::string, at::Tensor>>& tensors, const ModelConfig& config,
    const std::string& origin) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::map<std::string, ExpertParts> blocks;  // by "model.layers.N.mlp.experts"
  for (const auto& [stored_name, tensor] : tensors) {
    std::string name = stored_name;
    const std::string legacy = ".block_sparse_moe.";
    if (const size_t at = name.find(legacy); at != std::string::npos) name.replace(at, legacy.size(), ".mlp.");
    std::string block, role;
    int64_t expert = 0;
    if (parse_expert_name(name, block, expert, role)) {
      if (!blocks[block][role].emplace(expert, tensor).second)
        throw ModelError(origin + ": " + stored_name + " is stored twice");
    } else {
      out.emplace_back(std::move(name), tensor);
    }
  }
  for (const auto& [block, parts] : blocks) {
    for (const char* role : {"gate", "up", "down"})
      if (!parts.count(role))
        throw ModelError(origin + ": " + block + " has per-expert tensors but none for the " + role + " projection");
    const std::string what = origin + ": " + block;
    out.emplace_back(block + ".gate_up_proj", at::cat({stack_experts(parts.at("gate"), config.num_experts, what),
                                                       stack_experts(parts.at("up"), config.num_experts, what)},
                                                      1));
    out.emplace_back(block + ".down_proj", stack_experts(parts.at("down"), config.num_experts, what));
    // The stacks are copies: the experts' file pages need not stay beside them (load_weights).
    for (const auto& [role, experts] : parts)
      for (const auto& [expert, tensor] : experts) safetensors::release_mapped_pages(tensor);
  }
  return out;
}

}  // namespace ftcore::model

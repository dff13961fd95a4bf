// The sparse mixture-of-experts MLP of MixtralForCausalLM and
// Qwen3MoeForCausalLM (Shazeer et al., https://arxiv.org/abs/1701.06538;
// Mixtral, https://arxiv.org/abs/2401.04088), registered under the module
// paths transformers 5 uses:
//
//   model.layers.N.mlp.gate.weight               [E, C]      the router (a Linear without bias)
//   model.layers.N.mlp.experts.gate_up_proj      [E, 2F, C]  each expert's gate and up rows
//   model.layers.N.mlp.experts.down_proj         [E, C, F]
//
// Shapes: N tokens (B x T flattened), C hidden, E experts, K experts per
// token, F an expert's SwiGLU width.
//
//   p = softmax(x G^T) in fp32                         [N, E]
//   (w, i) = top-K of p; w /= sum(w) if norm_topk_prob [N, K]
//   y[n] = sum_k w[n,k] * expert_{i[n,k]}(x[n])        expert(x) = down(silu(gate(x)) * up(x))
//
// The experts run grouped: the N x K (token, expert) pairs are sorted by
// expert, each expert multiplies its rows in one matmul, and the weighted
// results are index_add-ed back to their tokens (no loop over tokens); one
// autograd node covers all experts (core/src/model/moe_grouped_mlp.h).
//
// The router weight and both expert stacks are sdk::ModelView's adaptable
// parameters: an adapter's sdk::ParameterTransform (LoRA's target_parameters)
// stands in for each on every forward, the parameter itself left frozen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "ftcore/model_config.h"
#include "ftcore/sdk/model_view.h"

namespace ftcore::model {

// What the router chose for N tokens.
struct Routing {
  at::Tensor logits;   // [N, E] in the activations' dtype (what transformers records as router_logits)
  at::Tensor experts;  // [N, K] int64, best first
  at::Tensor weights;  // [N, K] the mixing weights
};

class TopKRouter : public torch::nn::Module {
 public:
  TopKRouter(const ModelConfig& config, const c10::TensorOptions& options);
  Routing forward(const at::Tensor& x) const;  // x [N, C]
  const at::Tensor& weight() const { return weight_; }
  std::shared_ptr<sdk::ParameterTransform> weight_transform;  // null: the weight as it is

 private:
  at::Tensor weight_;  // [E, C]
  int64_t top_k_;
  bool normalise_, keep_fp32_weights_;
};

class Experts : public torch::nn::Module {
 public:
  Experts(int64_t num_experts, int64_t hidden_size, int64_t expert_width, const c10::TensorOptions& options);
  // x [N, C], routing of those tokens -> [N, C].
  at::Tensor forward(const at::Tensor& x, const Routing& routing) const;
  int64_t num_experts() const { return gate_up_proj.size(0); }
  at::Tensor gate_up_proj, down_proj;  // the parameters (see the file comment)
  std::shared_ptr<sdk::ParameterTransform> gate_up_transform, down_transform;  // null: the parameter as it is
};

// Each sparse layer's router logits of one forward, in layer order: what
// transformers returns as router_logits with output_router_logits.
using RouterLogits = std::vector<at::Tensor>;

class SparseMoeBlock : public torch::nn::Module {
 public:
  SparseMoeBlock(const ModelConfig& config, const c10::TensorOptions& options);
  // x [B, T, C] -> [B, T, C]; appends this layer's router logits [B*T, E] to `sink` when given.
  at::Tensor forward(const at::Tensor& x, RouterLogits* sink);
  std::shared_ptr<TopKRouter> gate;
  std::shared_ptr<Experts> experts;
};

// Checkpoint tensors with the per-expert layout (hub checkpoints, and what
// transformers 5's save_pretrained writes: block_sparse_moe.experts.E.w1 /
// mlp.experts.E.gate_proj ...) renamed and stacked into the fused tensors
// above; other tensors pass through. Errors name `origin` and the block.
std::vector<std::pair<std::string, at::Tensor>> fuse_expert_tensors(
    const std::vector<std::pair<std::string, at::Tensor>>& tensors, const ModelConfig& config,
    const std::string& origin);

}  // namespace ftcore::model

namespace ftcore {

// The auxiliary load-balancing loss of the Switch Transformer
// (Fedus et al., https://arxiv.org/abs/2101.03961, eqs. 4-6) as transformers'
// load_balancing_loss_func computes it over all sparse layers together:
//
//   f_e = (tokens routed to e among their top-K, over layers) / (tokens x layers)
//   P_e = (sum of softmax(logits)[., e] over layers and tokens) / (tokens x layers)
//   aux = E * sum_e f_e P_e
//
// `attention_mask` [B, T] (1 token, 0 padding), when defined, leaves padding
// out of both sums. Returns an fp32 scalar; differentiable through P.
at::Tensor load_balancing_loss(const model::RouterLogits& router_logits, int64_t num_experts, int64_t top_k,
                               const at::Tensor& attention_mask);

}  // namespace ftcore

// The sparse MoE block (model_moe.h): the top-K router, the grouped expert
// matmuls (moe_grouped_mlp.h) and the load-balancing loss, op for op as transformers 5's
// MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock and load_balancing_loss_func
// compute them, so fp32 outputs and router choices agree to rounding.
//
// Shapes: N tokens, C hidden, E experts, K experts per token, F expert width,
// P = N x K (token, expert) pairs.
#include <ATen/ATen.h>

#include "ftcore/model_moe.h"
#include "moe_grouped_mlp.h"

namespace ftcore::model {

TopKRouter::TopKRouter(const ModelConfig& c, const c10::TensorOptions& options)
    : top_k_(c.num_experts_per_tok), normalise_(c.norm_topk_prob) {
  weight_ = register_parameter("weight", at::empty({c.num_experts, c.hidden_size}, options));
  // Qwen3-MoE casts the mixing weights to the activations' dtype; Mixtral keeps them in fp32.
  keep_fp32_weights_ = c.model_type == "mixtral";
}

Routing TopKRouter::forward(const at::Tensor& x) const {
  Routing r;
  r.logits = at::linear(x, weight_transform ? weight_transform->forward(weight_) : weight_);  // [N, E]
  const at::Tensor probs = at::softmax(r.logits, -1, at::kFloat);  // [N, E] fp32
  auto [top, index] = at::topk(probs, top_k_, -1);        // [N, K], best first
  if (normalise_) top = top / top.sum(-1, /*keepdim=*/true);
  r.experts = index;
  r.weights = keep_fp32_weights_ ? top : top.to(r.logits.scalar_type());
  return r;
}

Experts::Experts(int64_t num_experts, int64_t hidden_size, int64_t expert_width, const c10::TensorOptions& options) {
  gate_up_proj = register_parameter("gate_up_proj", at::empty({num_experts, 2 * expert_width, hidden_size}, options));
  down_proj = register_parameter("down_proj", at::empty({num_experts, hidden_size, expert_width}, options));
}

at::Tensor Experts::forward(const at::Tensor& x, const Routing& routing) const {
  const int64_t num = num_experts(), k = routing.experts.size(1);
  if (x.size(0) == 0) return at::zeros_like(x);
  const at::Tensor flat = routing.experts.reshape(-1);                 // [P] the expert of each pair
  const at::Tensor order = at::argsort(flat, /*stable=*/true);         // pairs grouped by expert
  const at::Tensor token = at::floor_divide(order, k);                 // [P] the token of each sorted pair
  const at::Tensor counts = at::bincount(flat, {}, num).to(at::kCPU);  // pairs per expert (one host sync)
  const at::Tensor rows = x.index_select(0, token);                    // [P, C]
  const int64_t* count = counts.data_ptr<int64_t>();
  const at::Tensor w1 = gate_up_transform ? gate_up_transform->forward(gate_up_proj) : gate_up_proj;
  const at::Tensor w2 = down_transform ? down_transform->forward(down_proj) : down_proj;
  const at::Tensor out = grouped_expert_mlp(rows, std::vector<int64_t>(count, count + num), w1, w2);  // [P, C]
  const at::Tensor weights = routing.weights.reshape(-1).index_select(0, order).unsqueeze(1);         // [P, 1]
  return at::zeros_like(x).index_add(0, token, (out * weights).to(x.scalar_type()));
}

SparseMoeBlock::SparseMoeBlock(const ModelConfig& c, const c10::TensorOptions& options) {
  // Registered in transformers' order (Mixtral: gate, experts).
  gate = register_module("gate", std::make_shared<TopKRouter>(c, options));
  experts = register_module("experts",
                            std::make_shared<Experts>(c.num_experts, c.hidden_size, c.moe_intermediate_size, options));
}

at::Tensor SparseMoeBlock::forward(const at::Tensor& x, RouterLogits* sink) {
  const at::Tensor flat = x.reshape({-1, x.size(-1)});  // [N, C]
  const Routing routing = gate->forward(flat);
  if (sink) sink->push_back(routing.logits);
  return experts->forward(flat, routing).reshape(x.sizes());
}

}  // namespace ftcore::model

namespace ftcore {

at::Tensor load_balancing_loss(const model::RouterLogits& router_logits, int64_t num_experts, int64_t top_k,
                               const at::Tensor& attention_mask) {
  TORCH_CHECK(!router_logits.empty(), "load_balancing_loss: no router logits (the model has no sparse layer)");
  const at::TensorOptions fp32 = at::TensorOptions().dtype(at::kFloat).device(router_logits[0].device());
  at::Tensor routed = at::zeros({num_experts}, fp32);       // top-K choices per expert, over layers
  at::Tensor probability = at::zeros({num_experts}, fp32);  // summed router probability per expert
  at::Tensor rows = at::zeros({}, fp32);
  const int64_t n = router_logits[0].size(0);
  const at::Tensor mask = attention_mask.defined() ? attention_mask.reshape(-1).to(fp32) : at::ones({n}, fp32);
  TORCH_CHECK(mask.size(0) == n, "load_balancing_loss: the attention mask covers ", mask.size(0),
              " tokens, the router logits ", n);
  for (const at::Tensor& logits : router_logits) {
    const at::Tensor probs = at::softmax(logits, -1);  // in the logits' dtype, as transformers
    const at::Tensor chosen = std::get<1>(at::topk(probs, top_k, -1));
    routed = routed + at::zeros({num_experts}, fp32).scatter_add(0, chosen.reshape(-1), mask.repeat_interleave(top_k));
    probability = probability + (probs.to(at::kFloat) * mask.unsqueeze(-1)).sum(0);
    rows = rows + mask.sum();
  }
  return (routed / rows * (probability / rows)).sum() * static_cast<double>(num_experts);
}

}  // namespace ftcore

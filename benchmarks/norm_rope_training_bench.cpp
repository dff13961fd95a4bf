// RMSNorm and RoPE in a training step: forward and backward through the
// autograd nodes (fused_norm_rope_nodes.h) against ATen's op chains that
// autograd records otherwise, on the default model's shapes (SmolLM2-135M:
// hidden 576, 9 query and 3 key/value heads of 64; a batch of 8 rows of 55
// tokens, as train_vs_hf.py's LoRA steps), for fp32 and bf16 activations with
// fp32 cos/sin (bf16 autocast keeps the residual stream in fp32 and the
// projections in bf16). The two sides alternate call by call, so a change of
// the host's clock hits both; the table has each side's median of N calls
// and the ratio. Results: docs/benchmarks.md.
//
//   FTCORE_NUM_THREADS=2 build/bin/norm_rope_training_bench [calls]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "../core/src/model/fused_norm_rope.h"
#include "ftcore/runtime.h"

namespace {

using ftcore::RmsNormStyle;

double seconds_of(const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds of the node path and of the chain path, called alternately.
void compare(const std::string& what, int calls, const std::function<void()>& nodes,
             const std::function<void()>& chains) {
  for (int i = 0; i < 3; ++i) nodes(), chains();  // warm: allocator, process check
  std::vector<double> node_s, chain_s;
  for (int i = 0; i < calls; ++i) {
    node_s.push_back(seconds_of(nodes));
    chain_s.push_back(seconds_of(chains));
  }
  const double node_ms = median(node_s) * 1e3, chain_ms = median(chain_s) * 1e3;
  std::printf("| %s | %.3f | %.3f | %.2fx |\n", what.c_str(), chain_ms, node_ms, chain_ms / node_ms);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = ftcore::init_runtime();
  const int calls = argc > 1 ? std::atoi(argv[1]) : 200;
  const int64_t batch = 8, tokens = 55, hidden = 576, heads = 9, kv_heads = 3, head_dim = 64;
  std::printf("%d threads, %d calls per side; forward + backward, median ms\n\n", threads, calls);
  std::printf("| op, activations | ATen chain | node | chain / node |\n|---|---|---|---|\n");
  at::manual_seed(0);
  const at::Tensor angles = at::rand({batch, 1, tokens, head_dim}) * 100;
  const at::Tensor cos = angles.cos(), sin = angles.sin();  // fp32, as the model's rotary tables
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    const std::string dtype = type == at::kFloat ? "fp32" : "bf16";
    // RMSNorm over the residual stream, gain frozen (LoRA).
    const at::Tensor stream = at::randn({batch, tokens, hidden}).to(type).requires_grad_(true);
    const at::Tensor gain = (at::randn({hidden}) * 0.1 + 1).to(type);
    const at::Tensor norm_grad = at::randn({batch, tokens, hidden}).to(type);
    const auto norm = [&](bool fused) {
      const at::Tensor x = stream * 1;  // a non-leaf, as the residual stream is
      const at::Tensor y = fused ? ftcore::model::rms_norm(x, gain, 1e-5, RmsNormStyle::llama)
                                 : ftcore::model::rms_norm_aten_chain(x, gain, 1e-5, RmsNormStyle::llama);
      y.backward(norm_grad);
    };
    compare("RMSNorm, " + dtype, calls, [&] { norm(true); }, [&] { norm(false); });
    // RoPE on q and k, [B, heads, T, D] views of the projections' outputs.
    const at::Tensor q_proj = at::randn({batch, tokens, heads * head_dim}).to(type).requires_grad_(true);
    const at::Tensor k_proj = at::randn({batch, tokens, kv_heads * head_dim}).to(type).requires_grad_(true);
    const at::ScalarType out_type = c10::promoteTypes(type, cos.scalar_type());
    const at::Tensor q_grad = at::randn({batch, heads, tokens, head_dim}).to(out_type);
    const at::Tensor k_grad = at::randn({batch, kv_heads, tokens, head_dim}).to(out_type);
    const auto rope = [&](bool fused) {
      at::Tensor q = (q_proj * 1).view({batch, tokens, heads, head_dim}).transpose(1, 2);
      at::Tensor k = (k_proj * 1).view({batch, tokens, kv_heads, head_dim}).transpose(1, 2);
      const at::Tensor c = cos, s = sin;
      const at::Tensor rq = fused ? ftcore::model::rotary(std::move(q), c, s) : ftcore::model::rotary_aten_chain(q, c, s);
      const at::Tensor rk = fused ? ftcore::model::rotary(std::move(k), c, s) : ftcore::model::rotary_aten_chain(k, c, s);
      torch::autograd::backward({rq, rk}, {q_grad, k_grad});
    };
    compare("RoPE on q and k, " + dtype, calls, [&] { rope(true); }, [&] { rope(false); });
  }
  return 0;
}

// The grouped expert SwiGLU and its backward (moe_grouped_mlp.h).
//
// Shapes: P (token, expert) rows, C hidden, E experts, F expert width.
#include "moe_grouped_mlp.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Calls body(e, start, n) for each expert with rows, in order.
template <typename Body>
void for_each_expert(const std::vector<int64_t>& counts, Body&& body) {
  int64_t start = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    if (counts[e] > 0) body(static_cast<int64_t>(e), start, counts[e]);
    start += counts[e];
  }
}

// out = a b, written into `out` (a view: a row slice or one expert of a stack).
void mm_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b) { at::mm_out(out, a, b); }
void mul_into(at::Tensor out, const at::Tensor& a, const at::Tensor& b) { at::mul_out(out, a, b); }

// An [E, ...] gradient whose experts without rows are zero (the others are overwritten).
at::Tensor expert_gradient(const at::Tensor& like, const std::vector<int64_t>& counts) {
  at::Tensor g = at::empty_like(like, at::MemoryFormat::Contiguous);
  for (size_t e = 0; e < counts.size(); ++e)
    if (counts[e] == 0) g[static_cast<int64_t>(e)].zero_();
  return g;
}

class GroupedExpertMlp : public torch::autograd::Function<GroupedExpertMlp> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& rows, const at::Tensor& gate_up,
                            const at::Tensor& down, const std::vector<int64_t>& counts) {
    const int64_t width = down.size(2);
    at::Tensor h = at::empty({rows.size(0), 2 * width}, rows.options());  // [P, 2F]
    for_each_expert(counts, [&](int64_t e, int64_t start, int64_t n) {
      mm_into(h.narrow(0, start, n), rows.narrow(0, start, n), gate_up[e].t());
    });
    // As transformers: gate, up = chunk(2); act_fn(gate) * up.
    const at::Tensor act = at::silu(h.narrow(1, 0, width)) * h.narrow(1, width, width);  // [P, F]
    at::Tensor y = at::empty({rows.size(0), down.size(1)}, rows.options());              // [P, C]
    for_each_expert(counts, [&](int64_t e, int64_t start, int64_t n) {
      mm_into(y.narrow(0, start, n), act.narrow(0, start, n), down[e].t());
    });
    ctx->save_for_backward({rows, gate_up, down, h, act});
    ctx->saved_data["counts"] = counts;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &rows = saved[0], &gate_up = saved[1], &down = saved[2], &h = saved[3], &act = saved[4];
    const std::vector<int64_t> counts = ctx->saved_data["counts"].toIntVector();
    const at::Tensor dy = grads[0].contiguous();  // [P, C]
    const int64_t width = down.size(2);
    const bool need_rows = ctx->needs_input_grad(0), need_gate_up = ctx->needs_input_grad(1),
               need_down = ctx->needs_input_grad(2);

    at::Tensor d_act = at::empty_like(act);  // [P, F]
    at::Tensor d_down = need_down ? expert_gradient(down, counts) : at::Tensor();
    for_each_expert(counts, [&](int64_t e, int64_t start, int64_t n) {
      const at::Tensor dy_e = dy.narrow(0, start, n);
      mm_into(d_act.narrow(0, start, n), dy_e, down[e]);
      if (need_down) mm_into(d_down[e], dy_e.t(), act.narrow(0, start, n));
    });

    variable_list out(4);
    out[2] = d_down;
    if (!need_rows && !need_gate_up) return out;
    // silu'(g) = s (1 + g (1 - s)), the expression of torch's silu_backward.
    const at::Tensor g = h.narrow(1, 0, width), u = h.narrow(1, width, width);
    const at::Tensor s = at::sigmoid(g);
    at::Tensor dh = at::empty_like(h);  // [P, 2F]
    mul_into(dh.narrow(1, width, width), d_act, at::silu(g));
    mul_into(dh.narrow(1, 0, width), d_act * u, s * (1 + g * (1 - s)));
    if (need_rows) out[0] = at::empty_like(rows);
    if (need_gate_up) out[1] = expert_gradient(gate_up, counts);
    for_each_expert(counts, [&](int64_t e, int64_t start, int64_t n) {
      const at::Tensor dh_e = dh.narrow(0, start, n);
      if (need_rows) mm_into(out[0].narrow(0, start, n), dh_e, gate_up[e]);
      if (need_gate_up) mm_into(out[1][e], dh_e.t(), rows.narrow(0, start, n));
    });
    return out;
  }
};

}  // namespace

at::Tensor grouped_expert_mlp(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate_up,
                              const at::Tensor& down) {
  TORCH_CHECK(rows.dim() == 2 && gate_up.dim() == 3 && down.dim() == 3, "grouped_expert_mlp: rows [P, C], gate_up "
              "[E, 2F, C] and down [E, C, F] expected, got ", rows.sizes(), ", ", gate_up.sizes(), ", ", down.sizes());
  TORCH_CHECK(static_cast<int64_t>(counts.size()) == gate_up.size(0), "grouped_expert_mlp: ", counts.size(),
              " row counts for ", gate_up.size(0), " experts");
  return GroupedExpertMlp::apply(rows.contiguous(), gate_up, down, counts);
}

}  // namespace ftcore::model

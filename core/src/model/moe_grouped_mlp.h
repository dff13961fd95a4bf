// The experts' SwiGLU over (token, expert) rows already grouped by expert,
// as ONE autograd node (model_moe.h's Experts::forward uses it):
//
//   for each expert e with rows X_e [n_e, C] (a contiguous slice of X):
//     H_e = X_e W1_e^T          [n_e, 2F]   W1 = gate_up [E, 2F, C]
//     A_e = silu(G_e) * U_e     [n_e, F]    (G_e, U_e) = H_e's two halves
//     Y_e = A_e W2_e^T          [n_e, C]    W2 = down [E, C, F]
//
// Backward, per expert, on the same slices (nothing per token):
//     dA_e = dY_e W2_e,  dW2_e = dY_e^T A_e
//     dU = dA * silu(G),  dG = dA * U * s * (1 + G (1 - s)),  s = sigmoid(G)
//     dW1_e = dH_e^T X_e, dX_e = dH_e W1_e
//
// Why not autograd over per-expert ops: `W1[e]`'s select backward
// materialises a zero [E, 2F, C] gradient per expert and sums them, and the
// narrow / cat of the rows adds a copy per expert; here each expert's
// weight gradient is written once into its slice of one [E, ...] tensor
// (experts without rows get zeros), and only the gradients asked for are
// computed (frozen experts: dX alone).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace ftcore::model {

// rows [P, C] grouped by expert, `counts[e]` rows for expert e (sum = P);
// gate_up [E, 2F, C], down [E, C, F] (parameters or transforms of them).
// Returns Y [P, C]; differentiable in rows, gate_up and down.
at::Tensor grouped_expert_mlp(const at::Tensor& rows, const std::vector<int64_t>& counts, const at::Tensor& gate_up,
                              const at::Tensor& down);

}  // namespace ftcore::model

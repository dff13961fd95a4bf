// The GPTQ column loop (algorithm and conventions in gptq_solver.h).
#include "gptq_solver.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <ATen/ATen.h>

#include "ftcore/sdk/parallel.h"

namespace ftcore::plugins::gptq {
namespace {

// AutoGPTQ's min-max quantizer parameters for one row's values.
void minmax_params(const double* w, int64_t n, int maxq, bool sym, double* scale, double* zero) {
  double xmin = 0.0, xmax = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    xmin = std::min(xmin, w[j]);
    xmax = std::max(xmax, w[j]);
  }
  if (sym) {
    xmax = std::max(std::abs(xmin), xmax);
    if (xmin < 0) xmin = -xmax;
  }
  if (xmin == 0.0 && xmax == 0.0) {
    xmin = -1.0;
    xmax = 1.0;
  }
  *scale = (xmax - xmin) / maxq;
  *zero = sym ? (maxq + 1) / 2 : std::nearbyint(-xmin / *scale);
}

}  // namespace

GptqResult solve_gptq(const at::Tensor& weight, at::Tensor H, const GptqConfig& cfg, const std::string& path) {
  const int64_t out = weight.size(0), in = weight.size(1);
  const int maxq = (1 << cfg.bits) - 1;
  const int64_t gs = cfg.group_size > 0 ? cfg.group_size : in;
  const int64_t groups = (in + gs - 1) / gs;  // the last group may be short (576 = 4 x 128 + 64)
  at::Tensor W = weight.to(at::kDouble).contiguous().clone();
  H = H.to(at::kDouble).contiguous();

  at::Tensor scales = at::empty({groups, out}, at::kDouble);
  at::Tensor zeros = at::empty({groups, out}, at::kDouble);
  double* S = scales.data_ptr<double>();
  double* Z = zeros.data_ptr<double>();
  if (cfg.group_size <= 0) {  // one group, from the weight before dead columns are zeroed (as AutoGPTQ)
    const double* w = W.data_ptr<double>();
    for (int64_t r = 0; r < out; ++r) minmax_params(w + r * in, in, maxq, cfg.sym, &S[r], &Z[r]);
  }

  at::Tensor diag = H.diagonal();
  at::Tensor dead = diag.eq(0);
  if (dead.any().item<bool>()) {
    diag.masked_fill_(dead, 1.0);
    W.index_put_({at::indexing::Slice(), dead}, 0.0);
  }
  at::Tensor perm, invperm;
  if (cfg.desc_act) {
    perm = std::get<1>(at::sort(diag, /*stable=*/true, /*dim=*/0, /*descending=*/true));
    invperm = at::argsort(perm);
    W = W.index_select(1, perm).contiguous();
    H = H.index_select(0, perm).index_select(1, perm).contiguous();
  }
  H.diagonal().add_(cfg.damp_percent * H.diagonal().mean().item<double>());
  auto [L, info] = at::linalg_cholesky_ex(H);
  if (info.item<int64_t>() != 0)
    throw std::runtime_error("gptq: the Hessian of " + path +
                             " is not positive definite after dampening; raise damp_percent (now " +
                             std::to_string(cfg.damp_percent) + ")");
  at::Tensor U = at::linalg_cholesky(at::cholesky_inverse(L), /*upper=*/true).contiguous();
  L = at::Tensor();
  H = at::Tensor();

  at::Tensor codes = at::empty({out, in}, at::kInt);
  int32_t* C = codes.data_ptr<int32_t>();
  double* Wp = W.data_ptr<double>();
  const double* Up = U.data_ptr<double>();
  const int64_t bs = std::max<int64_t>(1, cfg.block_size);
  at::Tensor err = at::empty({out, bs}, at::kDouble);
  double* E = err.data_ptr<double>();
  const bool per_group = cfg.group_size > 0;
  for (int64_t i1 = 0; i1 < in; i1 += bs) {
    const int64_t i2 = std::min(i1 + bs, in), count = i2 - i1;
    sdk::parallel_for(0, out, 4, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        double* w = Wp + r * in;
        // Groups that start in this block take their range from W now, before the intra-block updates.
        if (per_group)
          for (int64_t c = (i1 + gs - 1) / gs * gs; c < i2; c += gs)
            minmax_params(w + c, std::min(gs, in - c), maxq, cfg.sym, &S[(c / gs) * out + r], &Z[(c / gs) * out + r]);
        double* e = E + r * bs;
        for (int64_t i = i1; i < i2; ++i) {
          const int64_t g = per_group ? i / gs : 0;
          const double s = S[g * out + r], z = Z[g * out + r];
          const double q = std::clamp(std::nearbyint(w[i] / s) + z, 0.0, static_cast<double>(maxq));
          C[r * in + i] = static_cast<int32_t>(q);
          const double ei = (w[i] - s * (q - z)) / Up[i * in + i];
          const double* u = Up + i * in;
          for (int64_t j = i + 1; j < i2; ++j) w[j] -= ei * u[j];
          e[i - i1] = ei;
        }
      }
    });
    if (i2 < in)
      W.narrow(1, i2, in - i2).sub_(err.narrow(1, 0, count).mm(U.narrow(0, i1, count).narrow(1, i2, in - i2)));
  }

  at::Tensor g_idx = at::arange(in, at::kLong).div(gs, "floor");
  if (cfg.desc_act) {
    codes = codes.index_select(1, invperm).contiguous();
    g_idx = g_idx.index_select(0, invperm);
  }
  return {codes, scales, zeros.to(at::kInt), g_idx.to(at::kInt).contiguous()};
}

}  // namespace ftcore::plugins::gptq

// x @ dequant(W)^T and g @ dequant(W) in tiles, never holding the dense W.
//
// W is [out, in], row-major in the flattened code order. Forward: a tile of
// T output rows is dequantized (compute dtype) into a scratch buffer and
// y[:, r0:r0+T] = x @ tile^T (one GEMM per tile, the full K = in reduction
// inside it). Backward: a slab of S input columns (all out rows) is
// dequantized and gx[:, c0:c0+S] = g @ slab, again with the full K = out
// reduction in one GEMM, so both round as a dense GEMM in that dtype does.
// Scratch is at most ~kTileElements elements.
#include <algorithm>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "bnb4bit.h"

namespace ftcore::plugins::bnb4bit {
namespace {

constexpr int64_t kTileElements = int64_t{1} << 20;

void check_2d(const Bnb4bitState& s, const at::Tensor& a, int64_t k, const char* what) {
  if (s.shape.size() != 2)
    throw std::invalid_argument("bnb4bit: matmul needs a 2-D weight, got " + std::to_string(s.shape.size()) + " dims");
  if (a.dim() < 1 || a.size(-1) != k)
    throw std::invalid_argument(std::string("bnb4bit: ") + what + " has last dim " +
                                (a.dim() ? std::to_string(a.size(-1)) : std::string("(scalar)")) + ", the weight wants " +
                                std::to_string(k));
}

std::vector<int64_t> with_last(const at::Tensor& a, int64_t last) {
  std::vector<int64_t> s(a.sizes().begin(), a.sizes().end());
  s.back() = last;
  return s;
}

}  // namespace

at::Tensor Bnb4bitQuantizer::matmul(const at::Tensor& x, const sdk::QuantizedWeight& weight) const {
  const Bnb4bitState& s = state_of(weight);
  check_2d(s, x, s.shape.size() == 2 ? s.shape[1] : -1, "matmul input");
  const int64_t out = s.shape[0], in = s.shape[1];
  const at::ScalarType cd = options_.compute_dtype;
  const at::Tensor x2 = x.reshape({-1, in}).to(cd).contiguous();
  const DequantSource src = dequant_source(packed_bytes(weight), s);
  at::Tensor y = at::empty({x2.size(0), out}, x2.options());
  int64_t rows = std::max<int64_t>(1, kTileElements / std::max<int64_t>(in, 1));
  if (rows >= 16) rows -= rows % 16;
  at::Tensor scratch = at::empty({std::min(rows, out), in}, x2.options());
  for (int64_t r0 = 0; r0 < out; r0 += rows) {
    const int64_t t = std::min(rows, out - r0);
    at::Tensor tile = scratch.narrow(0, 0, t);
    dequantize_range(src, r0 * in, (r0 + t) * in, tile.view({-1}));
    at::Tensor dst = y.narrow(1, r0, t);
    at::mm_out(dst, x2, tile.t());
  }
  return y.reshape(with_last(x, out)).to(x.scalar_type());
}

at::Tensor Bnb4bitQuantizer::matmul_grad_input(const at::Tensor& grad_out, const sdk::QuantizedWeight& weight) const {
  const Bnb4bitState& s = state_of(weight);
  check_2d(s, grad_out, s.shape.size() == 2 ? s.shape[0] : -1, "matmul_grad_input grad_out");
  const int64_t out = s.shape[0], in = s.shape[1];
  const at::ScalarType cd = options_.compute_dtype;
  const at::Tensor g2 = grad_out.reshape({-1, out}).to(cd).contiguous();
  const DequantSource src = dequant_source(packed_bytes(weight), s);
  at::Tensor gx = at::empty({g2.size(0), in}, g2.options());
  int64_t cols = std::max<int64_t>(64, kTileElements / std::max<int64_t>(out, 1));
  cols -= cols % 64;
  cols = std::min(cols, in);
  at::Tensor scratch = at::empty({out, cols}, g2.options());
  for (int64_t c0 = 0; c0 < in; c0 += cols) {
    const int64_t w = std::min(cols, in - c0);
    // The last, narrower slab reuses the front of the scratch buffer (contiguous [out, w]).
    at::Tensor slab = w == cols ? scratch : scratch.view({-1}).narrow(0, 0, out * w).view({out, w});
    dequantize_columns(src, c0, w, slab);
    at::Tensor dst = gx.narrow(1, c0, w);
    at::mm_out(dst, g2, slab);
  }
  return gx.reshape(with_last(grad_out, in)).to(grad_out.scalar_type());
}

}  // namespace ftcore::plugins::bnb4bit

// Tiled dequantize / matmul over a packed GPTQ weight (see gptq_kernel.h).
#include "gptq_kernel.h"

#include <ATen/ATen.h>

#include "ftcore/sdk/multi_tensor.h"
#include "ftcore/sdk/parallel.h"
#include "gptq_pack.h"

namespace ftcore::plugins::gptq {

GroupParams group_params(const PackedWeight& w) {
  return {w.scales.to(at::kFloat).contiguous(), unpack_zeros(w.qzeros, w.bits, w.out).to(at::kFloat).contiguous()};
}

at::Tensor dequantize_transposed_tile(const PackedWeight& w, const GroupParams& p, int64_t col0, int64_t cols) {
  const auto& kernels = sdk::kernels_for_this_cpu(&generic_kernels, &avx2_kernels, &avx512_kernels);
  at::Tensor dst = at::empty({w.in, cols}, at::kFloat);
  DequantTile tile{w.qweight.data_ptr<int32_t>(), w.out, p.scales.data_ptr<float>() + col0,
                   p.zeros.data_ptr<float>() + col0, w.g_idx.data_ptr<int32_t>(), w.bits, col0, cols,
                   dst.data_ptr<float>()};
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1));
  sdk::parallel_for(0, w.in, grain, [&](int64_t r0, int64_t r1) { kernels.rows(tile, r0, r1); });
  return dst;
}

at::Tensor dequantize_packed(const PackedWeight& w, at::ScalarType dtype) {
  at::Tensor result = at::empty({w.out, w.in}, dtype);
  const GroupParams p = group_params(w);
  for (int64_t c0 = 0; c0 < w.out; c0 += kTileOut) {
    const int64_t cols = std::min(kTileOut, w.out - c0);
    result.narrow(0, c0, cols).copy_(dequantize_transposed_tile(w, p, c0, cols).t());
  }
  return result;
}

// x [..., in] @ W^T in fp32, one output tile at a time; result in x's dtype.
at::Tensor matmul_packed(const at::Tensor& x, const PackedWeight& w) {
  TORCH_CHECK(x.size(-1) == w.in, "gptq matmul: x has ", x.size(-1), " features, the weight takes ", w.in);
  at::Tensor x2 = x.reshape({-1, w.in}).to(at::kFloat).contiguous();
  at::Tensor y = at::empty({x2.size(0), w.out}, at::kFloat);
  const GroupParams p = group_params(w);
  for (int64_t c0 = 0; c0 < w.out; c0 += kTileOut) {
    const int64_t cols = std::min(kTileOut, w.out - c0);
    y.narrow(1, c0, cols).copy_(x2.mm(dequantize_transposed_tile(w, p, c0, cols)));
  }
  auto shape = x.sizes().vec();
  shape.back() = w.out;
  return y.reshape(shape).to(x.scalar_type());
}

// grad_out [..., out] @ W = sum over output tiles of g[:, tile] @ W^T[:, tile]^T.
at::Tensor matmul_grad_input_packed(const at::Tensor& grad_out, const PackedWeight& w) {
  TORCH_CHECK(grad_out.size(-1) == w.out, "gptq matmul_grad_input: grad_out has ", grad_out.size(-1),
              " features, the weight has ", w.out, " outputs");
  at::Tensor g2 = grad_out.reshape({-1, w.out}).to(at::kFloat).contiguous();
  at::Tensor gx = at::zeros({g2.size(0), w.in}, at::kFloat);
  const GroupParams p = group_params(w);
  for (int64_t c0 = 0; c0 < w.out; c0 += kTileOut) {
    const int64_t cols = std::min(kTileOut, w.out - c0);
    gx.addmm_(g2.narrow(1, c0, cols), dequantize_transposed_tile(w, p, c0, cols).t());
  }
  auto shape = grad_out.sizes().vec();
  shape.back() = w.in;
  return gx.reshape(shape).to(grad_out.scalar_type());
}

}  // namespace ftcore::plugins::gptq

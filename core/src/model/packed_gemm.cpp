// PackedFrozenWeight (packed_gemm.h): the op handles found once, the packed
// copies kept per weight and rebuilt when its storage or version changes.
// Shapes: N rows of x (all leading dims), K = in_features, M = out_features.
#include "packed_gemm.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>

#include "../util/cpu_features.h"

namespace ftcore::model {

namespace {

using LinearPointwise = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                   std::string_view, c10::List<std::optional<at::Scalar>>,
                                   std::optional<std::string_view>);
using ReorderWeight = at::Tensor(const at::Tensor&, std::optional<int64_t>);

// The two oneDNN ops, or none when this libtorch was built without them.
struct OneDnnOps {
  std::optional<c10::TypedOperatorHandle<LinearPointwise>> linear;
  std::optional<c10::TypedOperatorHandle<ReorderWeight>> reorder;
};

const OneDnnOps& onednn_ops() {
  static const OneDnnOps ops = [] {
    OneDnnOps o;
    auto& dispatcher = c10::Dispatcher::singleton();
    auto linear = dispatcher.findSchema({"mkldnn::_linear_pointwise", ""});
    auto reorder = dispatcher.findSchema({"mkldnn::_reorder_linear_weight", ""});
    if (linear && reorder && at::hasMKLDNN()) {
      o.linear = linear->typed<LinearPointwise>();
      o.reorder = reorder->typed<ReorderWeight>();
    }
    return o;
  }();
  return ops;
}

// MKL picks its fast fp32 kernels by CPU vendor: on Intel (AVX-512 + AMX, the
// 2-core machines of docs/benchmarks.md) at::linear ran the default model's
// fp32 shapes 0.96-1.06x of the packed path, so packing would only cost the
// second copy of every frozen weight (+1.17 GB peak RSS). It pays off where
// MKL falls back to generic code (AMD: 2-20x). FTCORE_PACKED_GEMM=0/1 decides.
bool turned_off() {
  static const bool off = [] {
    const char* v = std::getenv("FTCORE_PACKED_GEMM");
    if (v && std::strcmp(v, "0") == 0) return true;
    if (v && std::strcmp(v, "1") == 0) return false;
    return util::on_intel_cpu();
  }();
  return off;
}

at::Tensor packed_matmul(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& bias) {
  return onednn_ops().linear->call(x.contiguous(), packed, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt,
                                   "none", c10::List<std::optional<at::Scalar>>(), std::nullopt);
}

// The constants of one call, kept out of autograd's inputs: oneDNN's opaque
// tensors have no device for the engine's input bookkeeping.
struct PackedOperands {
  at::Tensor packed, packed_transposed, bias;
};

// y = x W^T + b forward; dy -> dx = dy W as dy (W^T)^T with the packed W^T.
struct PackedLinearFunction : public torch::autograd::Function<PackedLinearFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const PackedOperands& w) {
    ctx->saved_data["packed_transposed"] = w.packed_transposed;
    return packed_matmul(x, w.packed, w.bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor packed_transposed = ctx->saved_data["packed_transposed"].toTensor();
    return {packed_matmul(grads[0], packed_transposed, at::Tensor()), at::Tensor()};
  }
};

}  // namespace

bool PackedFrozenWeight::applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (turned_off() || !onednn_ops().linear) return false;
  // Autocast would run at::linear in bf16; this path must not change that.
  if (at::autocast::is_autocast_enabled(at::kCPU)) return false;
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || weight.scalar_type() != at::kFloat) return false;
  // Frozen: no grad wanted for W or b in this call (a trained weight under
  // NoGradGuard, as in evaluation, counts: its version check repacks it).
  const bool grad_mode = at::GradMode::is_enabled();
  if ((grad_mode && weight.requires_grad()) || weight.is_inference() || weight.layout() != at::kStrided) return false;
  if (bias.defined() && ((grad_mode && bias.requires_grad()) || bias.scalar_type() != at::kFloat)) return false;
  return x.numel() > 0;
}

void PackedFrozenWeight::refresh(const at::Tensor& weight, bool need_transposed) {
  const bool stale = weight.data_ptr() != source_ || weight._version() != source_version_;
  if (stale) {
    packed_ = onednn_ops().reorder->call(weight.contiguous(), std::nullopt);
    packed_transposed_ = at::Tensor();
    source_ = weight.data_ptr();
    source_version_ = weight._version();
  }
  if (need_transposed && !packed_transposed_.defined())
    packed_transposed_ = onednn_ops().reorder->call(weight.t().contiguous(), std::nullopt);
}

at::Tensor PackedFrozenWeight::linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const bool records_grad = x.requires_grad() && at::GradMode::is_enabled();
  {
    at::NoGradGuard no_grad;  // the packed copies are constants, never part of a graph
    refresh(weight, records_grad);
  }
  if (!records_grad) return packed_matmul(x, packed_, bias);
  return PackedLinearFunction::apply(x, PackedOperands{packed_, packed_transposed_, bias});
}

}  // namespace ftcore::model

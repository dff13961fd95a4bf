// widened_gemm.h: the CPU choice, the widened GEMM and the frozen-weight Linear node.
#include "widened_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "../util/bf16_bits.h"
#include "../util/cpu_features.h"
#include "linear_rows.h"
#include "short_row_attention.h"
#include "ftcore/sdk/cpu_isa.h"
#include "ftcore/sdk/parallel.h"

namespace ftcore::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool widening_pays_on_this_cpu() {
  static const bool pays = util::on_intel_cpu() && sdk::detect_cpu_isa() == sdk::CpuIsa::Avx512 &&
                           !util::cpu_has_amx_bf16();
  return pays;
}

// The widened GEMM saves about 2.5 ps per multiply-add (170 vs 300 GFLOP/s)
// and its casts cost about 0.3 ns per operand element (read 2 bytes, write 4),
// so it pays where the multiply-adds per cast element, m k n / (m k + k n),
// exceed about 60: not for the lm_head over a step's few target rows (33 x 576
// x 49152, where casting the weight took 188 ms), nor LoRA's rank-8 products.
constexpr int64_t kMinMultiplyAddsPerCastElement = 64;

bool pays_for_its_casts(const at::Tensor& a, const at::Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  return m * k * n >= kMinMultiplyAddsPerCastElement * (m * k + k * n);
}

// The fp32 operands and sums live in buffers each thread keeps and reuses:
// fresh ones were mapped and page-faulted on every call, and in a full
// fine-tune (where little heap is free for reuse) casting a [1536, 576]
// weight into fresh memory took 2 ms against 0.3 ms in a LoRA step. A
// buffer grows to the largest use up to kLargestKeptElements (64 MiB);
// larger ones are allocated per call. The GEMM keeps no reference to its
// operands and the result is a fresh bf16 tensor, so reuse is safe; backward
// runs on one thread at a time per graph.
constexpr int64_t kLargestKeptElements = int64_t{16} << 20;

struct WideBuffers {
  at::Tensor a, b, sums;
};

WideBuffers& thread_buffers() {
  thread_local WideBuffers buffers;
  return buffers;
}

at::Tensor reused(at::Tensor& buffer, at::IntArrayRef sizes) {
  const int64_t n = c10::multiply_integers(sizes);
  if (n > kLargestKeptElements) return at::empty(sizes, at::kFloat);
  if (!buffer.defined() || buffer.numel() < n) buffer = at::empty({n}, at::kFloat);
  return buffer.narrow(0, 0, n).view(sizes);
}

// Elements per piece of the rounding pass: about 64 KiB read.
constexpr int64_t kRoundingGrain = 16384;

// bf16_rounded's pass, source and target contiguous fp32 of n elements (the same or apart).
void round_to_bf16_values(const float* source, float* target, int64_t n) {
  sdk::parallel_for(0, n, kRoundingGrain, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) target[i] = util::bf16_to_float(util::float_to_bf16(source[i]));
  });
}

bool is_transposed_contiguous(const at::Tensor& t) { return !t.is_contiguous() && t.dim() == 2 && t.t().is_contiguous(); }

// t in fp32, in t's layout, so MKL gets the transposes at::mm would give it:
// a bf16 t widened, an fp32 t rounded to bf16 values. A transposed operand
// (W^T) is cast as its contiguous self and transposed back: at::Tensor::to of
// the transposed view took 3.5-4.5x as long. A bf16 t of another layout (a
// piece of a plain b's columns) is widened from its strides, with no copy first.
at::Tensor widened(const at::Tensor& t, at::Tensor& buffer) {
  const bool transposed = is_transposed_contiguous(t);
  const at::Tensor source = transposed ? t.t() : t;
  at::Tensor wide = reused(buffer, source.sizes());
  if (source.scalar_type() == at::kFloat) {
    const at::Tensor dense = source.contiguous();
    round_to_bf16_values(dense.data_ptr<float>(), wide.data_ptr<float>(), dense.numel());
  } else {
    wide.copy_(source);
  }
  return transposed ? wide.t() : wide;
}

// Widened whole, a GEMM with a wide b puts b's fp32 copy and its fp32 sums in
// fresh memory once they outgrow the kept buffers: the default model's
// lm_head over 1,024 rows ([1024, 576] x [576, 49152]) cast the weight into
// 113 MB and wrote 201 MB of sums, page-faulted in on every forward. Where
// b's copy or the sums would exceed kPieceElements (16 MB of fp32), b's
// columns (the vocabulary) go in pieces whose copy and sums stay in the kept
// buffers, and each piece's sums are rounded into its columns of the result.
// Every output is the same sum over k, so pieces change no value's rounding rule.
constexpr int64_t kPieceElements = int64_t{4} << 20;

// Columns of b per piece for an [m, k] x [k, n] product: all n where it fits,
// else a multiple of 64 (whole cache lines of a row of sums).
int64_t columns_per_piece(int64_t m, int64_t k, int64_t n) {
  const int64_t rows = std::max(m, k);
  if (rows * n <= kPieceElements) return n;
  return std::max<int64_t>(64, kPieceElements / rows / 64 * 64);
}

// Whether a x b (a in the compute dtype) runs widened.
bool widens(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == at::kBFloat16 && a.device().is_cpu() && pays_for_its_casts(a, b) && widens_bf16_gemms();
}

// The fp32 sums wide_a x b (+ bias) into `sums`; b bf16, or fp32 (then
// rounded to bf16 values first), widened into the thread's buffer.
void widened_sums(const at::Tensor& wide_a, const at::Tensor& b, const at::Tensor& bias, at::Tensor& sums) {
  // Inside an autocast region (a custom node's forward) autocast would run the fp32 mm in bf16 again.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
  const at::Tensor wide_b = widened(b, thread_buffers().b);
  if (bias.defined())
    at::addmm_out(sums, bias.to(at::kFloat), wide_a, wide_b);
  else
    at::mm_out(sums, wide_a, wide_b);
}

// The widened a x b (+ bias), each output rounded to bf16 once; b's columns
// in pieces (columns_per_piece), each piece's sums in the thread's buffer.
at::Tensor widened_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  WideBuffers& buffers = thread_buffers();
  const int64_t m = a.size(0), n = b.size(1);
  const at::Tensor wide_a = widened(a, buffers.a);
  const int64_t width = columns_per_piece(m, a.size(1), n);
  at::Tensor result = at::empty({m, n}, a.options().dtype(at::kBFloat16));
  for (int64_t first = 0; first < n; first += width) {
    const int64_t w = std::min(width, n - first);
    at::Tensor sums = reused(buffers.sums, {m, w});
    widened_sums(wide_a, b.narrow(1, first, w), bias.defined() ? bias.narrow(0, first, w) : bias, sums);
    result.narrow(1, first, w).copy_(sums);
  }
  return result;
}

// y = x W^T (+ b) on a frozen weight: the bias and the weight get no gradient,
// so backward is the input gradient alone, grad W (MmBackward0's grad x mat2^T).
class FrozenWeightLinear : public torch::autograd::Function<FrozenWeightLinear> {
 public:
  // The bias is an optional: autograd's input bookkeeping takes no undefined tensor.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& low_x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
    ctx->save_for_backward({weight});
    return at::_unsafe_view(low_precision_mm(rows_of(low_x), weight.t(), bias.value_or(at::Tensor())),
                            sizes_with_last(low_x, weight.size(0)));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "frozen weight linear: no double backward (create_graph)");
    const at::Tensor weight = ctx->get_saved_variables()[0];
    const at::Tensor& grad = grad_outputs[0];
    at::Tensor grad_x;
    if (ctx->needs_input_grad(0)) {
      grad_x = low_precision_mm(rows_of(grad), weight).view(sizes_with_last(grad, weight.size(1)));
    }
    return {grad_x, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool widens_bf16_gemms() {
  const char* v = std::getenv("FTCORE_WIDEN_BF16_GEMM");
  if (v && std::strcmp(v, "0") == 0) return false;
  if (v && std::strcmp(v, "1") == 0) return true;
  return widening_pays_on_this_cpu();
}

at::Tensor low_precision_mm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias) {
  if (!widens(a, b)) return bias.defined() ? at::addmm(bias, a, b) : a.mm(b);
  return widened_mm(a, b, bias);
}

at::Tensor low_precision_mm_casting_b(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(b.scalar_type() == at::kFloat, "low_precision_mm_casting_b: b must be fp32");
  if (!widens(a, b)) {
    const bool transposed = is_transposed_contiguous(b);
    const at::Tensor cast = (transposed ? b.t() : b).to(a.scalar_type());
    return a.mm(transposed ? cast.t() : cast);
  }
  return widened_mm(a, b, at::Tensor());
}

at::Tensor low_precision_mm_to_float(const at::Tensor& a, const at::Tensor& b) {
  if (!widens(a, b)) return a.mm(b).to(at::kFloat);
  at::Tensor sums = at::empty({a.size(0), b.size(1)}, a.options().dtype(at::kFloat));  // the result
  widened_sums(widened(a, thread_buffers().a), b, at::Tensor(), sums);
  round_to_bf16_values(sums.data_ptr<float>(), sums.data_ptr<float>(), sums.numel());
  return sums;
}

at::Tensor bf16_rounded(const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.device().is_cpu(), "bf16_rounded: t must be an fp32 CPU tensor");
  const at::Tensor source = t.contiguous();
  at::Tensor rounded = at::empty_like(source);
  round_to_bf16_values(source.data_ptr<float>(), rounded.data_ptr<float>(), source.numel());
  return rounded;
}

bool frozen_weight_linear_widens(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!widens_bf16_gemms()) return false;
  const bool autocast = at::autocast::is_autocast_enabled(at::kCPU);
  const at::ScalarType compute =
      autocast && x.is_floating_point() && x.scalar_type() != at::kDouble ? at::autocast::get_autocast_dtype(at::kCPU)
                                                                           : x.scalar_type();
  // Without grad mode no node is recorded, so a trainable weight is as frozen as any;
  // but a checkpointed layer's first forward must take the path its recomputation
  // (with a graph) takes, or backward differentiates other activations.
  const bool records = at::GradMode::is_enabled() || CheckpointPassScope::current() != CheckpointPass::none;
  return compute == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 && !(records && weight.requires_grad()) &&
         weight.dim() == 2 && weight.device().is_cpu() && x.device().is_cpu() && x.layout() == at::kStrided &&
         x.dim() >= 2 && x.size(-1) == weight.size(1) &&
         (!bias.defined() || (!(records && bias.requires_grad()) && bias.dim() == 1 && bias.device().is_cpu() &&
                              (bias.scalar_type() == at::kBFloat16 || (autocast && bias.scalar_type() == at::kFloat))));
}

at::Tensor linear_on_frozen_weight(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  // autocast's casts of x and the bias (no-ops for bf16 ones).
  return FrozenWeightLinear::apply(x.to(at::kBFloat16).contiguous(), weight,
                                   bias.defined() ? std::optional<at::Tensor>(bias.to(at::kBFloat16)) : std::nullopt);
}

}  // namespace ftcore::model

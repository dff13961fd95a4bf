// Dequantization entry points: the nested absmax expanded to fp32, then the
// per-ISA 4-bit kernel in parallel (CPU) or the CUDA launchers of
// plugins/cuda/cuda_kernels.h (when this build has them).
#include <algorithm>
#include <stdexcept>

#include <ATen/ATen.h>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "bnb4bit.h"
#include "dequant_kernel.h"
#include "ftcore/sdk/parallel.h"

#if FTCORE_CUDA_KERNELS
#include "cuda_kernels.h"
#endif

namespace ftcore::plugins::bnb4bit {
namespace {

OutType out_type_of(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return OutType::F32;
    case at::kBFloat16: return OutType::BF16;
    case at::kHalf: return OutType::F16;
    default:
      throw std::invalid_argument(std::string("bnb4bit: dequantize to ") + c10::toString(dtype) +
                                  " is not supported (float32, bfloat16, float16)");
  }
}

#if FTCORE_CUDA_KERNELS
cuda::DType cuda_dtype_of(at::ScalarType dtype) {
  switch (out_type_of(dtype)) {
    case OutType::F32: return cuda::DType::F32;
    case OutType::BF16: return cuda::DType::BF16;
    default: return cuda::DType::F16;
  }
}

at::Tensor device_floats(const float* values, int64_t n, const at::Tensor& like) {
  return at::from_blob(const_cast<float*>(values), {n}, at::kFloat).to(like.device());
}
#endif

[[noreturn]] void no_cuda() {
  throw std::runtime_error(
      "bnb4bit: the weight is on a CUDA device but this build has no CUDA kernels (ftcore_cuda_kernels); "
      "rebuild with FTCORE_CUDA=ON or keep the model on the CPU");
}

}  // namespace

const Bnb4bitState& state_of(const sdk::QuantizedWeight& weight) {
  const auto* s = dynamic_cast<const Bnb4bitState*>(weight.state.get());
  if (!s) throw std::invalid_argument("bnb4bit: weight of format '" + weight.format + "' has no bnb4bit state");
  return *s;
}

at::Tensor packed_bytes(const sdk::QuantizedWeight& weight) {
  at::Tensor p = weight.packed.contiguous();
  if (p.scalar_type() != at::kByte) p = p.view(at::kByte);
  return p.reshape({-1});
}

int64_t Bnb4bitState::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

at::Tensor Bnb4bitState::absmax_f32() const {
  if (!nested) return absmax.contiguous();
  const int64_t n = absmax.numel();
  if (absmax.is_cuda()) {
#if FTCORE_CUDA_KERNELS
    at::Tensor out = at::empty({n}, absmax.options().dtype(at::kFloat));
    at::Tensor code = nested_code.to(absmax.device()).contiguous();
    at::Tensor nabs = nested_absmax.to(absmax.device()).contiguous();
    cuda::dequantize_blockwise_8bit(absmax.contiguous().data_ptr<uint8_t>(), nabs.data_ptr<float>(),
                                    code.data_ptr<float>(), n, nested_blocksize, offset, out.data_ptr<float>(),
                                    nullptr);
    return out;
#else
    no_cuda();
#endif
  }
  // code[q] * nested_absmax, then + offset: two fp32 roundings, as
  // dequantize_blockwise followed by absmax += offset.
  at::Tensor out = at::empty({n}, absmax.options().dtype(at::kFloat));
  const at::Tensor q = absmax.contiguous(), nabs = nested_absmax.contiguous(), code = nested_code.contiguous();
  const uint8_t* qp = q.data_ptr<uint8_t>();
  const float* np = nabs.data_ptr<float>();
  const float* cp = code.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t nb = nested_blocksize;
  const float off = offset;
  sdk::parallel_for(0, n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float scaled = cp[qp[i]] * np[i / nb];
      op[i] = scaled + off;
    }
  });
  return out;
}

DequantSource dequant_source(const at::Tensor& packed, const Bnb4bitState& state) {
  DequantSource src;
  src.state = &state;
  src.packed = packed;
  if (packed.is_cuda() || !state.nested) {
    src.absmax = state.absmax_f32();
  } else {
    src.absmax = state.absmax.contiguous();
    src.nested_absmax = state.nested_absmax.contiguous();
    src.nested_code = state.nested_code.contiguous();
  }
  return src;
}

namespace {

// Outputs at least this large are written with non-temporal stores: they do
// not fit in the last-level cache next to their input, so caching the lines
// would only cost the read-for-ownership of each (measured on 32 MiB outputs
// in benchmarks/dequant_bandwidth.py). The matmul tiles stay below it.
constexpr int64_t kStreamBytes = int64_t{8} << 20;

// Elements per unit of parallel work: a multiple of every block size's vector
// step (32), so each thread's stores start on the same 64-byte alignment.
constexpr int64_t kUnit = 4096;

DequantArgs cpu_args(const DequantSource& src, at::ScalarType out_dtype) {
  const Bnb4bitState& s = *src.state;
  DequantArgs a;
  a.packed = src.packed.data_ptr<uint8_t>();
  a.code = code_values(s.type).data();
  a.blocksize = s.blocksize;
  if (s.nested) {
    a.absmax_codes = src.absmax.data_ptr<uint8_t>();
    a.nested_absmax = src.nested_absmax.data_ptr<float>();
    a.nested_code = src.nested_code.data_ptr<float>();
    a.nested_blocksize = s.nested_blocksize;
    a.offset = s.offset;
  } else {
    a.absmax = src.absmax.data_ptr<float>();
  }
  a.out_type = out_type_of(out_dtype);
  return a;
}

// A fresh output takes a page fault (and a zeroing) per 4 KiB page as the
// kernel first writes it, which cost several times the kernel itself on
// 32 MiB outputs (benchmarks/dequant_bandwidth.py, "e2e"). Asking for
// transparent huge pages on it (THP in "madvise" or "always" mode) takes one
// fault per 2 MiB instead, as torch's THP_MEM_ALLOC_ENABLE does for every
// allocation. Advice only: where it is refused the pages stay 4 KiB.
constexpr int64_t kHugePageAdviceBytes = int64_t{4} << 20;

void advise_huge_pages(const at::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (!t.is_cpu() || static_cast<int64_t>(t.nbytes()) < kHugePageAdviceBytes) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t b = reinterpret_cast<uintptr_t>(t.data_ptr());
  uintptr_t e = b + t.nbytes();
  b = (b + page - 1) / page * page;
  e = e / page * page;
  if (e > b) (void)madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
#else
  (void)t;
#endif
}

}  // namespace

void dequantize_range(const DequantSource& src, int64_t begin, int64_t end, at::Tensor out) {
  const Bnb4bitState& state = *src.state;
  if (src.packed.is_cuda()) {
#if FTCORE_CUDA_KERNELS
    // The launcher starts at a block boundary: offset the pointers when the
    // range starts on one, else dequantize from the enclosing block's start.
    const auto& code = code_values(state.type);
    const int64_t first = begin / state.blocksize * state.blocksize;
    at::Tensor code16 = device_floats(code.data(), 16, src.packed);
    at::Tensor dst = first == begin ? out : at::empty({end - first}, out.options());
    cuda::dequantize_4bit(src.packed.data_ptr<uint8_t>() + first / 2,
                          src.absmax.data_ptr<float>() + first / state.blocksize, code16.data_ptr<float>(),
                          end - first, state.blocksize, dst.data_ptr(), cuda_dtype_of(out.scalar_type()), nullptr);
    if (first != begin) out.copy_(dst.narrow(0, begin - first, end - begin));
    return;
#else
    (void)state;
    no_cuda();
#endif
  }
  DequantArgs args = cpu_args(src, out.scalar_type());
  const int64_t elem = out.element_size();
  args.stream = (end - begin) * elem >= kStreamBytes;
  const DequantRangeFn fn = dequant_kernels().range;
  char* dst = static_cast<char*>(out.data_ptr());
  const int64_t n = end - begin, units = (n + kUnit - 1) / kUnit;
  // Grains of 16 Ki elements: one contiguous share per thread for large ranges.
  sdk::parallel_for(0, units, 4, [&](int64_t u0, int64_t u1) {
    const int64_t b = u0 * kUnit, e = std::min(n, u1 * kUnit);
    fn(args, begin + b, begin + e, dst + b * elem);
  });
}

void dequantize_columns(const DequantSource& src, int64_t c0, int64_t width, at::Tensor out) {
  const Bnb4bitState& state = *src.state;
  const int64_t rows = state.shape[0], in = state.shape[1];
  if (src.packed.is_cuda()) {
    for (int64_t r = 0; r < rows; ++r) dequantize_range(src, r * in + c0, r * in + c0 + width, out[r]);
    return;
  }
  const DequantArgs args = cpu_args(src, out.scalar_type());
  const DequantRangeFn fn = dequant_kernels().range;
  const int64_t elem = out.element_size();
  char* dst = static_cast<char*>(out.data_ptr());
  sdk::parallel_for(0, rows, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(width, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(args, r * in + c0, r * in + c0 + width, dst + r * width * elem);
  });
}

at::Tensor dequantize_all(const at::Tensor& packed, const Bnb4bitState& state, at::ScalarType dtype) {
  (void)out_type_of(dtype);
  const int64_t n = state.numel();
  at::Tensor out = at::empty({n}, packed.options().dtype(dtype));
  advise_huge_pages(out);
  if (n > 0) dequantize_range(dequant_source(packed, state), 0, n, out);
  return out.reshape(state.shape);
}

}  // namespace ftcore::plugins::bnb4bit

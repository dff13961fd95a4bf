// dropout_draws.h: the ISA choice, the one-time check against bernoulli_,
// and the call on the default generator.
#include "dropout_draws.h"

#include <cmath>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "dropout_draws_kernel.h"
#include "ftcore/sdk/cpu_isa.h"
#include "ftcore/sdk/parallel.h"

namespace ftcore::plugins::lora {

namespace {

struct Kernels {
  DropoutDrawsKernel draws;
  DropoutGradKernel grad;
};

const Kernels& chosen_kernels() {
  static const Kernels kernels = [] {
    switch (sdk::detect_cpu_isa()) {
      case sdk::CpuIsa::Avx512: return Kernels{&dropout_draws_avx512, &dropout_grad_avx512};
      case sdk::CpuIsa::Avx2: return Kernels{&dropout_draws_avx2, &dropout_grad_avx2};
      default: return Kernels{&dropout_draws_generic, &dropout_grad_generic};
    }
  }();
  return kernels;
}

// Pieces of dropout_grad per thread: 64 KiB of gradient each at least.
constexpr int64_t kGradGrainElements = 16384;

// u = bits * 2^-53 < keep  <=>  bits < keep * 2^53 (exact: a power-of-two
// scaling)  <=>  bits < ceil(keep * 2^53) for the integers bits < 2^53.
uint64_t threshold_of(double keep) { return static_cast<uint64_t>(std::ceil(std::ldexp(keep, 53))); }

// Runs the kernel on `generator`'s engine and puts the advanced engine back.
void draw(at::CPUGeneratorImpl& generator, const float* x, int64_t n, double keep, float kept_value, float* y,
          bool* mask) {
  std::lock_guard<std::mutex> lock(generator.mutex_);
  at::mt19937 engine = generator.engine();
  at::mt19937_data_pod state = engine.data();
  chosen_kernels().draws(state, x, n, threshold_of(keep), kept_value, y, mask);
  engine.set_data(state);
  generator.set_engine(engine);
}

}  // namespace

bool draws_match_torch() {
  static const bool match = [] {
    // 1000 elements take 2000 outputs: three regenerations, started mid-block
    // by one draw beforehand; then both engines must give the same next output.
    constexpr int64_t kElements = 1000;
    constexpr double kKeep = 0.9;
    at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(20261204);
    at::Generator ours = at::make_generator<at::CPUGeneratorImpl>(20261204);
    auto* their_impl = at::check_generator<at::CPUGeneratorImpl>(theirs);
    auto* our_impl = at::check_generator<at::CPUGeneratorImpl>(ours);
    their_impl->random();
    our_impl->random();
    const at::Tensor noise = at::empty({kElements}, at::kFloat).bernoulli_(kKeep, theirs);
    const at::Tensor ones = at::ones({kElements}, at::kFloat);
    at::Tensor y = at::empty({kElements}, at::kFloat), mask = at::empty({kElements}, at::kBool);
    draw(*our_impl, ones.data_ptr<float>(), kElements, kKeep, 1.0f, y.data_ptr<float>(), mask.data_ptr<bool>());
    return at::equal(noise, y) && their_impl->random() == our_impl->random();
  }();
  return match;
}

DroppedOut dropout_from_torch_draws(const at::Tensor& x, double keep, float kept_value) {
  DroppedOut out;
  out.y = at::empty_like(x, at::MemoryFormat::Contiguous);
  out.mask = at::empty(x.sizes(), x.options().dtype(at::kBool));
  auto* generator = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator());
  draw(*generator, x.data_ptr<float>(), x.numel(), keep, kept_value, out.y.data_ptr<float>(), out.mask.data_ptr<bool>());
  return out;
}

at::Tensor dropout_grad(const at::Tensor& grad, const at::Tensor& mask, float kept_value) {
  const at::Tensor g = grad.contiguous();
  at::Tensor out = at::empty_like(g);
  const float* g_data = g.data_ptr<float>();
  const bool* mask_data = mask.data_ptr<bool>();
  float* out_data = out.data_ptr<float>();
  const DropoutGradKernel kernel = chosen_kernels().grad;
  // Elementwise, so any split gives the same bits; on one thread the default
  // model's [344, 576] gradients took 3% of an fp32 LoRA step (stop 29).
  sdk::parallel_for(0, g.numel(), kGradGrainElements, [&](int64_t first, int64_t last) {
    kernel(g_data + first, mask_data + first, kept_value, last - first, out_data + first);
  });
  return out;
}

}  // namespace ftcore::plugins::lora

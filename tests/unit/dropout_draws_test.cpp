// LoRA dropout's one-pass draws (plugins/adapters/lora/dropout_draws.h)
// against libtorch itself: for each ISA variant this CPU runs, from
// generators advanced to several offsets inside mt19937's 624-word block,
// over sizes that end inside, at and across blocks and probabilities from
// 0.05 to 0.999, the keep mask must equal bernoulli_(keep) != 0, y must equal
// x * (bernoulli_(keep) / keep) bit for bit (x holds negatives, signed zeros,
// infinities and NaN), and both generators must give the same next outputs.
// The default-generator entry point must equal at::dropout from the same seed,
// and the one-pass gradient grad * where(mask, s, 0) as autograd forms it.
// lora_A(dropout(x)) as one node that keeps x and the mask (lora_dropout.h):
// the same output, x gradient and A gradient, bit for bit, as the composition
// autograd records, and the same generator state after it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/function.h>

#include "dropout_draws.h"
#include "dropout_draws_kernel.h"
#include "lora_dropout.h"
#include "ftcore/sdk/cpu_isa.h"
#include "test_support.h"

namespace lora = ftcore::plugins::lora;
using ftcore::sdk::CpuIsa;

namespace {

struct Variant {
  std::string name;
  lora::DropoutDrawsKernel kernel;
  lora::DropoutGradKernel grad;
  CpuIsa needs;
};

std::vector<Variant> variants_this_cpu_runs() {
  std::vector<Variant> all = {{"generic", &lora::dropout_draws_generic, &lora::dropout_grad_generic, CpuIsa::Generic},
                              {"avx2", &lora::dropout_draws_avx2, &lora::dropout_grad_avx2, CpuIsa::Avx2},
                              {"avx512", &lora::dropout_draws_avx512, &lora::dropout_grad_avx512, CpuIsa::Avx512}};
  std::vector<Variant> out;
  for (const auto& v : all)
    if (v.needs <= ftcore::sdk::detect_cpu_isa()) out.push_back(v);
  return out;
}

at::Tensor inputs(int64_t n) {
  at::Tensor x = at::randn({n}, at::kFloat);
  float* d = x.data_ptr<float>();
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (int64_t i = 0; i < n && i < 5; ++i) d[i * 7 % n] = specials[i];
  return x;
}

}  // namespace

using ftcore::testing::same_bits;

TEST(DropoutDraws, ThisLibtorchDrawsAsDescribed) {
  EXPECT_TRUE(lora::draws_match_torch()) << "libtorch's bernoulli_ no longer draws as dropout_draws.h describes; "
                                            "LoRA dropout falls back to it (correct, slower): update dropout_draws";
}

TEST(DropoutDraws, EveryIsaEqualsBernoulliAndLeavesTheGeneratorWhereItDoes) {
  at::manual_seed(7);
  const std::vector<int64_t> sizes = {1, 2, 311, 312, 313, 624, 1000, 4099, 8 * 55 * 576 + 13};
  const std::vector<int> offsets = {0, 1, 5, 623, 624, 1247};  // 32-bit outputs drawn before
  const std::vector<double> keeps = {0.95, 0.9, 0.5, 0.05, 0.999};
  int checked = 0;
  for (const auto& v : variants_this_cpu_runs()) {
    for (int64_t n : sizes) {
      for (int offset : offsets) {
        const double keep = keeps[(checked++) % keeps.size()];
        const uint64_t seed = 1000 + checked;
        at::Generator theirs = at::make_generator<at::CPUGeneratorImpl>(seed);
        at::Generator ours = at::make_generator<at::CPUGeneratorImpl>(seed);
        auto* their_impl = at::check_generator<at::CPUGeneratorImpl>(theirs);
        auto* our_impl = at::check_generator<at::CPUGeneratorImpl>(ours);
        for (int k = 0; k < offset; ++k) {
          their_impl->random();
          our_impl->random();
        }
        const at::Tensor x = inputs(n);
        const at::Tensor noise = at::empty({n}, at::kFloat).bernoulli_(keep, theirs).div_(keep);
        const at::Tensor expected = x * noise;
        const float kept_value = at::ones({1}, at::kFloat).div_(keep).item<float>();

        at::Tensor y = at::empty({n}, at::kFloat), mask = at::empty({n}, at::kBool);
        at::mt19937 engine = our_impl->engine();
        at::mt19937_data_pod state = engine.data();
        const uint64_t threshold = static_cast<uint64_t>(std::ceil(std::ldexp(keep, 53)));
        v.kernel(state, x.data_ptr<float>(), n, threshold, kept_value, y.data_ptr<float>(),
                 mask.data_ptr<bool>());
        engine.set_data(state);
        our_impl->set_engine(engine);

        const std::string where = v.name + " n=" + std::to_string(n) + " offset=" + std::to_string(offset) +
                                  " keep=" + std::to_string(keep);
        ASSERT_TRUE(at::equal(mask, noise.ne(0))) << where;
        ASSERT_TRUE(same_bits(y, expected)) << where;
        for (int k = 0; k < 3; ++k) ASSERT_EQ(our_impl->random(), their_impl->random()) << where << " output " << k;
      }
    }
  }
  std::printf("[ draws ] %d cases over %zu ISA variants equal bernoulli_ bit for bit\n", checked,
              variants_this_cpu_runs().size());
}

TEST(DropoutDraws, DefaultGeneratorEqualsAtDropout) {
  ASSERT_TRUE(lora::draws_match_torch());
  for (double p : {0.05, 0.1, 0.3}) {
    const at::Tensor x = at::randn({8 * 41, 576}, at::kFloat);
    at::manual_seed(42);
    const at::Tensor kept = at::empty_like(x).bernoulli_(1 - p).ne(0);
    at::manual_seed(42);
    const at::Tensor expected = at::dropout(x, p, /*train=*/true);
    const uint64_t next_after_torch = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator())->random();
    at::manual_seed(42);
    const float kept_value = at::ones({1}, at::kFloat).div_(1 - p).item<float>();
    const lora::DroppedOut d = lora::dropout_from_torch_draws(x, 1 - p, kept_value);
    const uint64_t next_after_ours = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator())->random();
    EXPECT_TRUE(same_bits(d.y, expected)) << "p=" << p;
    EXPECT_TRUE(at::equal(d.mask, kept)) << "p=" << p;
    EXPECT_EQ(d.y.sizes(), x.sizes());
    EXPECT_EQ(next_after_ours, next_after_torch) << "p=" << p;
  }
}

TEST(DropoutDraws, GradientEqualsTheProductWithTheNoise) {
  at::manual_seed(3);
  const float kept_value = at::ones({1}, at::kFloat).div_(0.9).item<float>();
  for (const auto& v : variants_this_cpu_runs()) {
    for (int64_t n : {1, 17, 4099, 8 * 55 * 576 + 13}) {
      const at::Tensor grad = inputs(n);
      const at::Tensor mask = at::rand({n}).lt(0.9);
      const at::Tensor expected = grad * at::where(mask, at::scalar_tensor(kept_value), at::scalar_tensor(0.0f));
      at::Tensor out = at::empty({n}, at::kFloat);
      v.grad(grad.data_ptr<float>(), mask.data_ptr<bool>(), kept_value, n, out.data_ptr<float>());
      EXPECT_TRUE(same_bits(out, expected)) << v.name << " n=" << n;
    }
  }
  const at::Tensor grad = at::randn({8, 55, 576}).transpose(0, 1);  // not contiguous
  const at::Tensor mask = at::rand({55, 8, 576}).lt(0.9);
  const at::Tensor expected = grad * at::where(mask, at::scalar_tensor(kept_value), at::scalar_tensor(0.0f));
  EXPECT_TRUE(same_bits(lora::dropout_grad(grad, mask, kept_value), expected.contiguous()));
}

namespace {

struct DownProjection {
  at::Tensor out, grad_x, grad_a;
  uint64_t next_draw;
  std::string node;  // the graph node that made out
};

// out = down(x, A) from seed 7, then backward of sum(out * weights): what reaches x and A.
template <typename Down>
DownProjection run_down(const at::Tensor& x0, const at::Tensor& a0, bool x_needs_grad, Down down) {
  const at::Tensor x = x0.clone().requires_grad_(x_needs_grad), a = a0.clone().requires_grad_(true);
  at::manual_seed(7);
  const at::Tensor out = down(x, a);
  const std::string node = out.grad_fn()->name();
  const uint64_t next = at::check_generator<at::CPUGeneratorImpl>(at::detail::getDefaultCPUGenerator())->random();
  at::manual_seed(8);
  (out * at::randn(out.sizes())).sum().backward();
  return {out.detach(), x_needs_grad ? x.grad() : at::Tensor(), a.grad(), next, node};
}

}  // namespace

TEST(DropoutDraws, DownProjectionKeepingTheMaskEqualsTheComposition) {
  ASSERT_TRUE(lora::draws_match_torch());
  at::manual_seed(5);
  const at::Tensor a = at::randn({8, 576}) * 0.02;
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{8, 41, 576}, {97, 576}}) {
    const at::Tensor x = inputs(shape[0] * (shape.size() == 3 ? shape[1] : 1) * 576).view(shape);
    for (bool x_needs_grad : {true, false}) {
      const DownProjection node = run_down(x, a, x_needs_grad, [](const at::Tensor& xs, const at::Tensor& as) {
        return lora::dropout_then_down_projection(xs, 0.05, as);
      });
      const DownProjection composed = run_down(x, a, x_needs_grad, [](const at::Tensor& xs, const at::Tensor& as) {
        return at::linear(lora::dropout_with_byte_mask(xs, 0.05), as);
      });
      const std::string what = "rows " + std::to_string(x.size(0)) + (x_needs_grad ? ", x needs grad" : ", x frozen");
      EXPECT_NE(node.node.find("DroppedDownProjection"), std::string::npos) << node.node;
      EXPECT_TRUE(same_bits(node.out, composed.out)) << what;
      EXPECT_TRUE(same_bits(node.grad_a, composed.grad_a)) << what;
      if (x_needs_grad) EXPECT_TRUE(same_bits(node.grad_x, composed.grad_x)) << what;
      EXPECT_EQ(node.next_draw, composed.next_draw) << what;
    }
  }
}

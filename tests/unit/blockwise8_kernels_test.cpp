// The 8-bit optimizers' block codec of every ISA this CPU runs (generic,
// AVX2, AVX-512, AVX-512 with VBMI: Optim8bitKernels::quantize_state /
// dequantize_state) against the scalar rule of blockwise8.h
// (quantize_blockwise / dequantize_blockwise, which
// tests/reference/blockwise8_reference.py holds bit-equal to bitsandbytes). The AVX-512 codec searches the code among the map's 255 steps
// instead of reading the rounding table (code_search_avx512.h has the proof);
// these cases check it exhaustively: every grid key 0..65535 at its exact
// float boundary and the neighbours of that boundary, every midpoint between
// map entries with its nextafter neighbours under several absmax values, a
// dense stride through all 2^32 float bit patterns (NaN, infinities,
// subnormals included), partial and all-zero blocks. Codes and absmax must be
// equal, every one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "blockwise8.h"
#include "ftcore/sdk/cpu_isa.h"
#include "optim8bit_kernel.h"

namespace b8 = ftcore::plugins::blockwise8;
using ftcore::sdk::CpuIsa;

namespace {

#include "quantize_element.h"

struct IsaKernels {
  std::string name;
  b8::Optim8bitKernels kernels;
};

// The variants this CPU can run; the widest one is what the optimizers call.
std::vector<IsaKernels> runnable_variants() {
  std::vector<IsaKernels> v{{"generic", b8::generic_kernels()}};
  const CpuIsa best = ftcore::sdk::detect_cpu_isa();
  if (best >= CpuIsa::Avx2) v.push_back({"avx2", b8::avx2_kernels()});
  if (best >= CpuIsa::Avx512) v.push_back({"avx512", b8::avx512_kernels()});
  else std::printf("note: no AVX-512 on this CPU; the avx512 codec is not run here\n");
  if (best >= CpuIsa::Avx512 && __builtin_cpu_supports("avx512vbmi")) v.push_back({"avx512vbmi", b8::avx512vbmi_kernels()});
  else std::printf("note: no AVX512-VBMI on this CPU; the avx512vbmi codec is not run here\n");
  return v;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Codes and absmax of x (blocks of 256) by every variant, against the scalar rule.
void expect_codes_equal(const std::vector<float>& x, bool is_signed, const std::string& what) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t blocks = b8::num_blocks(n, b8::kStateBlock);
  std::vector<uint8_t> want(n), got(n);
  std::vector<float> want_absmax(blocks), got_absmax(blocks);
  b8::quantize_blockwise(x.data(), n, b8::kStateBlock, b8::quant_map(is_signed), want.data(), want_absmax.data());
  for (const IsaKernels& isa : runnable_variants()) {
    std::fill(got.begin(), got.end(), uint8_t{0xAA});
    isa.kernels.quantize_state(x.data(), n, is_signed, got.data(), got_absmax.data());
    int64_t differ = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != want[i] && differ++ == 0) first = i;
    EXPECT_EQ(differ, 0) << isa.name << " " << what << (is_signed ? " signed" : " unsigned") << ": " << differ << "/" << n
                         << " codes differ, first at " << first << " (x = " << (first >= 0 ? x[first] : 0.0f)
                         << ", want " << int(first >= 0 ? want[first] : 0) << ", got " << int(first >= 0 ? got[first] : 0)
                         << ")";
    EXPECT_EQ(std::memcmp(got_absmax.data(), want_absmax.data(), blocks * sizeof(float)), 0)
        << isa.name << " " << what << ": absmax differs";
  }
}

// Blocks of 256 whose first element is `absmax` (so every block's absmax is
// exactly that) followed by the values, each clamped into [-absmax, absmax].
std::vector<float> in_blocks_with_absmax(const std::vector<float>& values, float absmax) {
  std::vector<float> out;
  size_t i = 0;
  while (i < values.size()) {
    out.push_back(absmax);
    for (int j = 1; j < b8::kStateBlock && i < values.size(); ++j, ++i)
      out.push_back(std::fmin(absmax, std::fmax(-absmax, values[i])));
  }
  return out;
}

// Float keys ordered like the floats (for bisection over bit patterns).
int64_t order_key(float f) {
  const uint32_t u = bits_of(f);
  return (u >> 31) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
}
float from_order_key(int64_t k) { return k < 0 ? float_of(static_cast<uint32_t>(-k) | 0x80000000u) : float_of(k); }

}  // namespace

// Every grid key 0..65535 is reached, at its exact lower boundary in [-1, 1]
// (bisection over floats, absmax 1) and 3 floats either side: the search's
// whole domain, and every place where its answer can change.
TEST(Blockwise8KernelsTest, EveryGridKeyAtItsBoundary) {
  std::vector<float> values;
  std::set<int32_t> keys;
  const int64_t lo_key = order_key(-1.0f), hi_key = order_key(1.0f);
  for (int32_t k = 0; k < b8::kLutSize; ++k) {
    int64_t lo = lo_key, hi = hi_key;  // smallest x with grid_point(x, 1) >= k
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (grid_point(from_order_key(mid), 1.0f) >= k) hi = mid;
      else lo = mid + 1;
    }
    for (int64_t d = -3; d <= 3; ++d) {
      const int64_t at = std::min(hi_key, std::max(lo_key, lo + d));
      values.push_back(from_order_key(at));
      keys.insert(grid_point(from_order_key(at), 1.0f));
    }
  }
  ASSERT_EQ(keys.size(), static_cast<size_t>(b8::kLutSize)) << "the inputs must reach every grid key";
  for (bool is_signed : {true, false}) expect_codes_equal(in_blocks_with_absmax(values, 1.0f), is_signed, "grid keys");
}

// The midpoints between neighbouring map entries (the rounding ties of the
// map itself) and 4 floats either side, scaled by several block absmax values.
TEST(Blockwise8KernelsTest, MidpointsAndNeighboursUnderSeveralAbsmax) {
  for (bool is_signed : {true, false}) {
    const auto& code = b8::quant_map(is_signed).code;
    for (float absmax : {1.0f, 0.37f, 3.1e-5f, 7.5e3f, 1e-30f}) {
      std::vector<float> values;
      for (int i = 0; i + 1 < 256; ++i) {
        float at = 0.5f * (code[i] + code[i + 1]) * absmax;
        for (int d = 0; d < 4; ++d) at = std::nextafter(at, -std::numeric_limits<float>::infinity());
        for (int d = 0; d < 9; ++d, at = std::nextafter(at, std::numeric_limits<float>::infinity())) values.push_back(at);
      }
      for (float c : code) values.push_back(c * absmax);
      expect_codes_equal(in_blocks_with_absmax(values, absmax), is_signed, "midpoints x " + std::to_string(absmax));
    }
  }
}

// A stride through all 2^32 bit patterns (every sign, exponent, subnormals,
// infinities, NaNs), in blocks as they come, so each block has its own absmax.
TEST(Blockwise8KernelsTest, DenseStrideThroughAllFloats) {
  std::vector<float> x;
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 2053) x.push_back(float_of(static_cast<uint32_t>(u)));
  expect_codes_equal(x, true, "all-float stride");
  std::vector<float> magnitudes(x.size());
  for (size_t i = 0; i < x.size(); ++i) magnitudes[i] = std::fabs(x[i]);
  expect_codes_equal(magnitudes, false, "all-float stride, magnitudes");
  // Values within [-1, 1] only (absmax 1 where a block reaches it): a finer stride where the codes are.
  std::vector<float> unit;
  for (uint32_t u = 0; u <= bits_of(1.0f); u += 97) {
    unit.push_back(float_of(u));
    unit.push_back(-float_of(u));
  }
  expect_codes_equal(unit, true, "unit interval stride");
  for (float& f : unit) f = std::fabs(f);
  expect_codes_equal(unit, false, "unit interval stride, magnitudes");
}

// A short last block, an all-zero block and a block of one element.
TEST(Blockwise8KernelsTest, PartialAndZeroBlocks) {
  for (int64_t n : {1, 17, 63, 64, 65, 255, 257, 256 * 3 + 77}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.7f * static_cast<float>(i)) * (i % 5 == 0 ? 1e-4f : 1.0f);
    if (n > 512) std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
    for (bool is_signed : {true, false}) {
      std::vector<float> y = x;
      if (!is_signed)
        for (float& f : y) f = f * f;
      expect_codes_equal(y, is_signed, "n=" + std::to_string(n));
    }
  }
}

// Every code under several absmax values dequantizes to map[code] * absmax.
TEST(Blockwise8KernelsTest, DequantizeEveryCode) {
  const std::vector<float> absmaxes = {1.0f, 0.37f, 3.1e-5f, 7.5e3f, 0.0f};
  std::vector<uint8_t> codes;
  std::vector<float> absmax;
  for (float a : absmaxes) {
    for (int c = 0; c < 256; ++c) codes.push_back(static_cast<uint8_t>((c * 37 + 11) & 255));  // every code, shuffled
    absmax.push_back(a);
  }
  codes.resize(codes.size() - 40);  // a short last block
  const int64_t n = static_cast<int64_t>(codes.size());
  for (bool is_signed : {true, false}) {
    std::vector<float> want(n), got(n);
    b8::dequantize_blockwise(codes.data(), absmax.data(), n, b8::kStateBlock, b8::quant_map(is_signed), want.data());
    for (const IsaKernels& isa : runnable_variants()) {
      isa.kernels.dequantize_state(codes.data(), absmax.data(), n, is_signed, got.data());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0) << isa.name << " dequantize differs";
    }
  }
}

namespace {

// Values converted to a parameter dtype (rounded as c10 rounds).
template <typename T>
std::vector<T> as_dtype(const std::vector<float>& x) {
  return std::vector<T>(x.begin(), x.end());
}

// Three 8-bit Adam steps of every variant from one state, against the generic
// build (the scalar rule, which tests/reference/adamw_8bit_reference.py holds
// to bitsandbytes): parameters, codes and absmax equal bit for bit after each
// step. The AVX-512 step requantizes one block while it updates the next and
// issues the update between the search's steps (optim8bit_kernel_impl.h);
// the blocks here reach each of its paths: full 128-element slices with both
// reciprocals normal (interleaved), a block whose new absmax is 0 (all codes
// 0), one whose absmaxes are both below 2^-127 (1 / absmax infinite: the
// clamp), one where only exp_avg_sq's is, one with a NaN gradient, and a last
// block of 200 elements (one interleaved slice, then a short one).
template <typename T>
void expect_adam_steps_equal(const char* dtype) {
  constexpr int64_t kBlocks = 12, n = 256 * kBlocks + 200;
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::sin(0.37f * static_cast<float>(i));
    g[i] = std::cos(1.3f * static_cast<float>(i)) * (i % 7 == 0 ? 1e-5f : 3e-3f);
    m[i] = std::sin(2.1f * static_cast<float>(i)) * 1e-3f;
    v[i] = m[i] * m[i] + 1e-9f;
  }
  for (int64_t i = 256 * 3; i < 256 * 4; ++i) g[i] = m[i] = v[i] = 0.0f;              // absmax 0
  for (int64_t i = 256 * 5; i < 256 * 6; ++i) g[i] = m[i] = v[i] = 1e-39f * (i % 3);  // subnormal absmax
  for (int64_t i = 256 * 9; i < 256 * 10; ++i) {  // exp_avg's absmax normal, exp_avg_sq's not
    g[i] = 0.0f;
    v[i] = 1e-39f;
  }
  g[256 * 7 + 40] = std::nanf("");
  const int64_t blocks = b8::num_blocks(n, b8::kStateBlock);
  const b8::Optim8bitKernels generic = b8::generic_kernels();
  std::vector<uint8_t> start1(n), start2(n);
  std::vector<float> start_absmax1(blocks), start_absmax2(blocks);
  generic.quantize_state(m.data(), n, true, start1.data(), start_absmax1.data());
  generic.quantize_state(v.data(), n, false, start2.data(), start_absmax2.data());
  struct Run {
    std::vector<T> p, g;
    std::vector<uint8_t> s1, s2;
    std::vector<float> a1, a2;
  };
  const auto fresh = [&] { return Run{as_dtype<T>(p), as_dtype<T>(g), start1, start2, start_absmax1, start_absmax2}; };
  const auto step = [&](const b8::Optim8bitKernels& k, Run& r, int64_t t) {
    b8::Adam8bitTensor work{r.p.data(), r.g.data(), n, c10::CppTypeToScalarType<T>::value,
                            r.s1.data(), r.s2.data(), r.a1.data(), r.a2.data()};
    work.scalars = b8::adam8bit_scalars(1e-3, 0.9, 0.999, 1e-8, 0.01, t, 1.0f);
    auto chunk = std::is_same_v<T, float> ? k.adam.f32 : std::is_same_v<T, c10::BFloat16> ? k.adam.bf16 : k.adam.f16;
    chunk(work, 0, n);
  };
  for (const IsaKernels& isa : runnable_variants()) {
    Run want = fresh(), got = fresh();
    for (int64_t t = 1; t <= 3; ++t) {
      step(generic, want, t);
      step(isa.kernels, got, t);
      const std::string what = isa.name + " " + dtype + " step " + std::to_string(t);
      EXPECT_EQ(std::memcmp(got.p.data(), want.p.data(), n * sizeof(T)), 0) << what << ": parameters differ";
      EXPECT_EQ(got.s1, want.s1) << what << ": exp_avg codes differ";
      EXPECT_EQ(got.s2, want.s2) << what << ": exp_avg_sq codes differ";
      EXPECT_EQ(std::memcmp(got.a1.data(), want.a1.data(), blocks * sizeof(float)), 0) << what << ": absmax1 differs";
      EXPECT_EQ(std::memcmp(got.a2.data(), want.a2.data(), blocks * sizeof(float)), 0) << what << ": absmax2 differs";
    }
    // The paths were reached: what decides them is whether 1 / absmax is normal.
    const auto normal_inverse = [](float absmax) { return std::isnormal(1.0f / absmax); };
    EXPECT_EQ(got.a1[3], 0.0f) << isa.name << ": block 3";
    EXPECT_FALSE(normal_inverse(got.a1[5]) || normal_inverse(got.a2[5])) << isa.name << ": block 5";
    EXPECT_TRUE(normal_inverse(got.a1[9]) && !normal_inverse(got.a2[9])) << isa.name << ": block 9";
    EXPECT_TRUE(normal_inverse(got.a1[0]) && normal_inverse(got.a2[0])) << isa.name << ": block 0";
  }
}

}  // namespace

TEST(Blockwise8KernelsTest, AdamStepsOfEveryVariantEqualTheGenericBuild) {
  expect_adam_steps_equal<float>("fp32");
  expect_adam_steps_equal<c10::BFloat16>("bf16");
  expect_adam_steps_equal<c10::Half>("fp16");
}

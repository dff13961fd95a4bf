// ftcore_cuda_kernels (plugins/cuda/cuda_kernels.h) against bitsandbytes and
// against an fp32 host reference written here from bitsandbytes' definitions.
//
// Two anchors:
//  - bitsandbytes (cuda_kernels_reference.py, its CPU backend): the host
//    reference reproduces bnb's 8-bit Adam/Lion step (codes and absmax
//    exactly, params within the ulps stated in cuda_kernels_test_support.h)
//    and its NF4/FP4 and nested 8-bit dequantization on bnb's own inputs.
//    Runs without a GPU.
//  - the host reference: every kernel must equal it bit for bit, on bnb's
//    inputs and on random odd sizes (not multiples of 256 or of the
//    quantization block), through the vectorized and the element-wise paths
//    (misaligned buffers), over several chained steps. Both sides do the same
//    IEEE fp32 operations in the same order without fused multiply-adds (the
//    library is built with --fmad=false, this file with -ffp-contract=off),
//    so the only tolerance is none. Skipped without a CUDA device.
// `cuda_kernels_test --benchmark` measures bandwidth instead (cuda_kernels_bench.cpp).
#include <cuda_runtime.h>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "cuda_kernels.h"
#include "cuda_kernels_test_support.h"
#include "test_support.h"

namespace {

using ftcore::cuda::DType;
using namespace ftcore::cuda_test;

// ---------------------------------------------------------------- bnb's data

struct BnbData {
  std::filesystem::path dir;
  nlohmann::json manifest;
  template <typename T>
  std::vector<T> read(const std::string& name) const {
    std::ifstream in(dir / (name + ".bin"), std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + (dir / (name + ".bin")).string());
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
  // Values of a param/grad/output file of `dtype`, widened to float.
  std::vector<float> read_values(const std::string& name, DType dtype) const {
    if (dtype == DType::F32) return read<float>(name);
    std::vector<uint16_t> bits = read<uint16_t>(name);
    std::vector<float> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = decode(bits[i], dtype);
    return out;
  }
};

// bnb's data, made once per build tree by cuda_kernels_reference.py (a minute
// of Python start-up) and remade when the script is newer than the data; ctest
// runs every test in its own process.
const BnbData& bnb_data() {
  namespace fs = std::filesystem;
  static BnbData data = [] {
    const fs::path script = fs::path(FTCORE_SOURCE_DIR) / "tests/unit/cuda_kernels_reference.py";
    const fs::path dir = fs::path(FTCORE_BUILD_DIR) / "tests/cuda_kernels_reference";
    const fs::path manifest = dir / "manifest.json";
    auto fresh = [&] { return fs::exists(manifest) && fs::last_write_time(manifest) >= fs::last_write_time(script); };
    if (!fresh()) {
      // Written beside and renamed into place, so concurrent tests never see half a folder.
      const fs::path tmp = dir.string() + ".tmp" + std::to_string(::getpid());
      fs::remove_all(tmp);
      ftcore::testing::run_python("unit/cuda_kernels_reference.py", ftcore::testing::shell_quote(tmp.string()));
      std::error_code ec;
      if (!fresh()) {  // else another test process got there first: keep its copy
        fs::remove_all(dir, ec);
        fs::rename(tmp, dir, ec);
      }
      fs::remove_all(tmp, ec);
    }
    BnbData d{dir, {}};
    std::ifstream in(manifest);
    d.manifest = nlohmann::json::parse(in);
    return d;
  }();
  return data;
}

DType dtype_of(const std::string& name) {
  if (name == "f32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  if (name == "f16") return DType::F16;
  throw std::invalid_argument("unknown dtype " + name);
}

OptimizerCase adam_case_from_bnb(const nlohmann::json& c, const BnbData& d) {
  OptimizerCase k;
  k.rule = Rule::Adam;
  k.dtype = dtype_of(c["dtype"]);
  k.param = d.read_values(c["param_in"], k.dtype);
  k.grad = d.read_values(c["grad"], k.dtype);
  k.state1 = d.read<uint8_t>(c["state1_in"]);
  k.state2 = d.read<uint8_t>(c["state2_in"]);
  k.absmax1 = d.read<float>(c["absmax1_in"]);
  k.absmax2 = d.read<float>(c["absmax2_in"]);
  k.qmap1 = d.read<float>(c["qmap1"]);
  k.qmap2 = d.read<float>(c["qmap2"]);
  k.h = {c["beta1"], c["beta2"], c["eps"], c["lr"], c["weight_decay"], c["gnorm_scale"],
         static_cast<float>(c["bias_correction1"].get<double>()), static_cast<float>(c["bias_correction2"].get<double>())};
  return k;
}

OptimizerCase lion_case_from_bnb(const nlohmann::json& c, const BnbData& d) {
  OptimizerCase k;
  k.rule = Rule::Lion;
  k.dtype = dtype_of(c["dtype"]);
  k.param = d.read_values(c["param_in"], k.dtype);
  k.grad = d.read_values(c["grad"], k.dtype);
  k.state1 = d.read<uint8_t>(c["state1_in"]);
  k.absmax1 = d.read<float>(c["absmax1_in"]);
  k.qmap1 = d.read<float>(c["qmap1"]);
  k.h = {c["beta1"], c["beta2"], 0.0f, c["lr"], c["weight_decay"], c["gnorm_scale"], 1.0f, 1.0f};
  return k;
}

// Params, a prior state (random codes and absmax; the first block fresh:
// codes 0, absmax 0) and bnb's dynamic maps as its CPU backend leaves them.
OptimizerCase random_case(Rule rule, DType dtype, int64_t numel, uint32_t seed) {
  const nlohmann::json& bnb_adam = bnb_data().manifest["adam"][0];
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  OptimizerCase k;
  k.rule = rule;
  k.dtype = dtype;
  k.param.resize(numel);
  for (auto& p : k.param) p = round_to(normal(rng), dtype);
  const int64_t blocks = (numel + 255) / 256;
  auto random_state = [&](std::vector<uint8_t>& codes, std::vector<float>& absmax, int min_exp) {
    codes.resize(numel);
    absmax.resize(blocks);
    for (int64_t i = 0; i < numel; ++i) codes[i] = i < 256 ? 0 : static_cast<uint8_t>(rng() & 0xff);
    for (int64_t b = 0; b < blocks; ++b) absmax[b] = b == 0 ? 0.0f : std::ldexp(1.0f + float(rng() % 97) / 97.0f, min_exp + int(rng() % 8));
  };
  random_state(k.state1, k.absmax1, -12);
  k.qmap1 = bnb_data().read<float>(bnb_adam["qmap1"]);
  if (rule == Rule::Adam) {
    random_state(k.state2, k.absmax2, -20);
    k.qmap2 = bnb_data().read<float>(bnb_adam["qmap2"]);
    k.h = {0.9f, 0.999f, 1e-8f, 1e-3f, numel % 4 == 1 ? 0.01f : 0.0f, 1.0f, 1.0f, 1.0f};
  } else {
    k.h = {0.9f, 0.99f, 0.0f, 1e-4f, numel % 4 == 1 ? 0.1f : 0.0f, 0.5f, 1.0f, 1.0f};
  }
  return k;
}

// A stepped case (host or device)
// against bnb's step, within the tolerances stated in cuda_kernels_test_support.h.
void expect_step_matches_bnb(const OptimizerCase& got, const nlohmann::json& c, const BnbData& d) {
  const std::string what = std::string(c["dtype"]) + " numel " + std::to_string(got.param.size());
  const std::vector<float> want_param = d.read_values(c["param_out"], got.dtype);
  expect_params_close(got.param, want_param, got.dtype, kParamUlpsVsBnb, kParamDifferingFractionVsBnb, what);
  EXPECT_EQ(got.state1, d.read<uint8_t>(c["state1_out"])) << what << " state1";
  EXPECT_EQ(got.absmax1, d.read<float>(c["absmax1_out"])) << what << " absmax1";
  if (got.rule == Rule::Adam) {
    EXPECT_EQ(got.state2, d.read<uint8_t>(c["state2_out"])) << what << " state2";
    EXPECT_EQ(got.absmax2, d.read<float>(c["absmax2_out"])) << what << " absmax2";
  }
}

TEST(CudaKernelsReference, HostAdam8bitMatchesBitsandbytes) {
  const BnbData& d = bnb_data();
  for (const auto& c : d.manifest["adam"]) {
    OptimizerCase k = adam_case_from_bnb(c, d);
    step_reference(k);
    expect_step_matches_bnb(k, c, d);
  }
}

TEST(CudaKernelsReference, HostLion8bitMatchesBitsandbytes) {
  const BnbData& d = bnb_data();
  for (const auto& c : d.manifest["lion"]) {
    OptimizerCase k = lion_case_from_bnb(c, d);
    step_reference(k);
    expect_step_matches_bnb(k, c, d);
  }
}

// Dequantization is one multiply (and one add) per element: exact.
TEST(CudaKernelsReference, HostDequantizeMatchesBitsandbytes) {
  const BnbData& d = bnb_data();
  for (const auto& c : d.manifest["dequant4"]) {
    const auto packed = d.read<uint8_t>(c["packed"]);
    const auto absmax = d.read<float>(c["absmax"]);
    const auto code16 = d.read<float>(c["code16"]);
    for (const auto& [name, file] : c["out"].items()) {
      const DType dtype = dtype_of(name);
      const auto got = dequantize_4bit_reference(packed, absmax, code16, c["numel"], c["blocksize"], dtype);
      EXPECT_EQ(got, d.read_values(file, dtype)) << c["quant_type"] << " " << name;
    }
  }
  for (const auto& c : d.manifest["dequant8"]) {
    const auto got = dequantize_8bit_reference(d.read<uint8_t>(c["codes"]), d.read<float>(c["absmax"]),
                                               d.read<float>(c["code256"]), c["numel"], c["blocksize"], c["offset"]);
    EXPECT_EQ(got, d.read<float>(c["out"]));
  }
}

// ------------------------------------------------------------ kernels vs host

#define SKIP_WITHOUT_DEVICE() \
  if (!ftcore::cuda::device_available()) GTEST_SKIP() << "no CUDA device"

TEST(CudaKernels, OptimizerStepsOnBitsandbytesInputsEqualHostReference) {
  SKIP_WITHOUT_DEVICE();
  const BnbData& d = bnb_data();
  for (const char* rule : {"adam", "lion"}) {
    for (const auto& c : d.manifest[rule]) {
      OptimizerCase host = std::string(rule) == "adam" ? adam_case_from_bnb(c, d) : lion_case_from_bnb(c, d);
      OptimizerCase device = host;
      step_reference(host);
      step_on_device(device, /*misalign=*/false);
      expect_identical(device, host, std::string(rule) + " " + std::string(c["dtype"]));
      expect_step_matches_bnb(device, c, d);
    }
  }
}

TEST(CudaKernels, OptimizerStepsOddSizesBothPathsSeveralSteps) {
  SKIP_WITHOUT_DEVICE();
  for (Rule rule : {Rule::Adam, Rule::Lion})
    for (DType dtype : {DType::F32, DType::BF16, DType::F16})
      for (int64_t numel : {int64_t{1}, int64_t{255}, int64_t{257}, int64_t{256 * 37 + 129}})
        for (bool misalign : {false, true}) {
          OptimizerCase host = random_case(rule, dtype, numel, static_cast<uint32_t>(numel * 7 + int(dtype)));
          OptimizerCase device = host;
          for (int step = 1; step <= 4; ++step) {
            host.set_step(step);
            device.set_step(step);
            host.grad = device.grad = random_grad(numel, dtype, static_cast<uint32_t>(step * 1000 + numel));
            step_reference(host);
            step_on_device(device, misalign);
            expect_identical(device, host,
                             std::string(rule == Rule::Adam ? "adam " : "lion ") + dtype_label(dtype) + " numel " +
                                 std::to_string(numel) + (misalign ? " misaligned" : "") + " step " +
                                 std::to_string(step));
          }
        }
}

TEST(CudaKernels, Dequantize4bitEqualsBitsandbytesAndHostReference) {
  SKIP_WITHOUT_DEVICE();
  const BnbData& d = bnb_data();
  for (const auto& c : d.manifest["dequant4"]) {
    const auto packed = d.read<uint8_t>(c["packed"]);
    const auto absmax = d.read<float>(c["absmax"]);
    const auto code16 = d.read<float>(c["code16"]);
    for (const auto& [name, file] : c["out"].items()) {
      const DType dtype = dtype_of(name);
      for (bool misalign : {false, true}) {
        const auto got = dequantize_4bit_on_device(packed, absmax, code16, c["numel"], c["blocksize"], dtype, misalign);
        EXPECT_EQ(got, d.read_values(file, dtype)) << c["quant_type"] << " " << name << (misalign ? " misaligned" : "");
      }
    }
  }
  // Blocks that are not multiples of the 16-element group, odd sizes, random codes.
  std::mt19937 rng(5);
  for (int64_t blocksize : {int64_t{24}, int64_t{64}, int64_t{100}})
    for (int64_t numel : {int64_t{1}, int64_t{17}, int64_t{1000 * 3 + 7}}) {
      const auto [packed, absmax] = random_4bit(numel, blocksize, rng);
      std::vector<float> code16(16);
      for (int i = 0; i < 16; ++i) code16[i] = -1.0f + 2.0f * float(i) / 15.0f;
      for (DType dtype : {DType::F32, DType::BF16, DType::F16})
        for (bool misalign : {false, true})
          EXPECT_EQ(dequantize_4bit_on_device(packed, absmax, code16, numel, blocksize, dtype, misalign),
                    dequantize_4bit_reference(packed, absmax, code16, numel, blocksize, dtype))
              << "blocksize " << blocksize << " numel " << numel << " " << dtype_label(dtype);
    }
}

TEST(CudaKernels, Dequantize8bitEqualsBitsandbytesAndHostReference) {
  SKIP_WITHOUT_DEVICE();
  const BnbData& d = bnb_data();
  for (const auto& c : d.manifest["dequant8"]) {
    const auto codes = d.read<uint8_t>(c["codes"]);
    const auto absmax = d.read<float>(c["absmax"]);
    const auto code256 = d.read<float>(c["code256"]);
    for (bool misalign : {false, true})
      EXPECT_EQ(dequantize_8bit_on_device(codes, absmax, code256, c["numel"], c["blocksize"], c["offset"], misalign),
                d.read<float>(c["out"]));
  }
  std::mt19937 rng(6);
  std::vector<float> code256(256);
  for (int i = 0; i < 256; ++i) code256[i] = std::ldexp(float(i) - 127.5f, -7);
  for (int64_t blocksize : {int64_t{6}, int64_t{256}})
    for (int64_t numel : {int64_t{3}, int64_t{515}, int64_t{4099}}) {
      std::vector<uint8_t> codes(numel);
      for (auto& x : codes) x = static_cast<uint8_t>(rng() & 0xff);
      std::vector<float> absmax((numel + blocksize - 1) / blocksize);
      for (auto& x : absmax) x = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, int(rng() % 8) - 4);
      for (bool misalign : {false, true})
        EXPECT_EQ(dequantize_8bit_on_device(codes, absmax, code256, numel, blocksize, -0.375f, misalign),
                  dequantize_8bit_reference(codes, absmax, code256, numel, blocksize, -0.375f))
            << "blocksize " << blocksize << " numel " << numel;
    }
}

TEST(CudaKernels, ManagedMemoryRoundTripWithPrefetchBothWays) {
  SKIP_WITHOUT_DEVICE();
  constexpr int64_t n = (1 << 20) + 3;  // 4 MiB + 3 floats: many pages, a partial last one
  auto* codes = static_cast<uint8_t*>(ftcore::cuda::managed_alloc(n));
  auto* out = static_cast<float*>(ftcore::cuda::managed_alloc(n * sizeof(float)));
  auto* absmax = static_cast<float*>(ftcore::cuda::managed_alloc(((n + 255) / 256) * sizeof(float)));
  auto* code256 = static_cast<float*>(ftcore::cuda::managed_alloc(256 * sizeof(float)));
  ASSERT_NE(codes, nullptr);
  for (int64_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(i * 31 % 251);  // written on the host
  for (int64_t b = 0; b < (n + 255) / 256; ++b) absmax[b] = float(b % 17 + 1);
  for (int i = 0; i < 256; ++i) code256[i] = float(i);
  int device = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  for (void* p : {static_cast<void*>(codes), static_cast<void*>(absmax), static_cast<void*>(code256)})
    ftcore::cuda::prefetch(p, p == codes ? n : p == code256 ? 1024 : ((n + 255) / 256) * 4, device, nullptr);
  ftcore::cuda::prefetch(out, n * sizeof(float), device, nullptr);
  EXPECT_EQ(last_prefetch_location(out, n * sizeof(float)), device);
  ftcore::cuda::dequantize_blockwise_8bit(codes, absmax, code256, n, 256, 0.5f, out, nullptr);
  ftcore::cuda::prefetch(out, n * sizeof(float), -1, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(last_prefetch_location(out, n * sizeof(float)), cudaCpuDeviceId);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)  // small integers times small integers: exact in fp32
    wrong += out[i] != float(i * 31 % 251) * float((i / 256) % 17 + 1) + 0.5f;
  EXPECT_EQ(wrong, 0);
  for (void* p : {static_cast<void*>(codes), static_cast<void*>(out), static_cast<void*>(absmax),
                  static_cast<void*>(code256)})
    ftcore::cuda::managed_free(p);
  EXPECT_EQ(ftcore::cuda::managed_alloc(0), nullptr);
  ftcore::cuda::managed_free(nullptr);
}

// ---------------------------------------------------------------- errors

TEST(CudaKernelsErrors, LaunchersRejectBadArgumentsBeforeTouchingTheDevice) {
  ftcore::cuda::Adam8bitArgs adam;
  adam.numel = 10;  // param and everything else null
  EXPECT_THROW(
      {
        try {
          ftcore::cuda::adam8bit_blockwise_step(adam, nullptr);
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("adam8bit_blockwise_step: param is null"), std::string::npos) << e.what();
          throw;
        }
      },
      std::invalid_argument);
  adam.numel = -1;
  EXPECT_THROW(ftcore::cuda::adam8bit_blockwise_step(adam, nullptr), std::invalid_argument);
  adam.numel = 0;  // nothing to do, nothing checked
  EXPECT_NO_THROW(ftcore::cuda::adam8bit_blockwise_step(adam, nullptr));
  ftcore::cuda::Lion8bitArgs lion;
  lion.numel = 3;
  EXPECT_THROW(ftcore::cuda::lion8bit_blockwise_step(lion, nullptr), std::invalid_argument);
  uint8_t byte = 0;
  float f = 0;
  EXPECT_THROW(ftcore::cuda::dequantize_4bit(&byte, &f, &f, 2, 0, &f, DType::F32, nullptr), std::invalid_argument);
  EXPECT_THROW(ftcore::cuda::dequantize_blockwise_8bit(nullptr, &f, &f, 1, 256, 0.0f, &f, nullptr),
               std::invalid_argument);
  EXPECT_THROW(ftcore::cuda::prefetch(&f, 4, -2, nullptr), std::invalid_argument);
}

// A failing runtime call names itself: prefetching to device 1000 fails with
// a device (invalid ordinal) and without one (no device or driver).
TEST(CudaKernelsErrors, FailedRuntimeCallsThrowWithTheCallAndCudaMessage) {
  float not_managed[64] = {};
  try {
    ftcore::cuda::prefetch(not_managed, sizeof(not_managed), 1000, nullptr);
    FAIL() << "prefetch to device 1000 did not throw";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ftcore::cuda::prefetch: cudaMemPrefetchAsync"), std::string::npos) << what;
    EXPECT_NE(what.find("failed: cuda"), std::string::npos) << what;  // cudaGetErrorName
  }
  (void)cudaGetLastError();
  int count = 0;
  EXPECT_EQ(ftcore::cuda::device_available(), cudaGetDeviceCount(&count) == cudaSuccess && count > 0);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--benchmark") return ftcore::cuda_test::run_benchmark(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

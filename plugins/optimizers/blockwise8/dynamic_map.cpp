// bitsandbytes' dynamic map, built with ATen ops in the order create_dynamic_map uses.
#include "dynamic_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>

namespace ftcore::plugins::blockwise8 {
namespace {

constexpr int kMaxExponentBits = 7;
constexpr int kNonSignBits = 7;  // total_bits 8 minus the sign bit

std::array<float, 256> build_dynamic_map(bool is_signed) {
  std::vector<double> data;  // Python floats in the definition (.tolist()), sorted as doubles
  for (int i = 0; i < kMaxExponentBits; ++i) {
    const int64_t fraction_items =
        is_signed ? (int64_t{1} << (i + kNonSignBits - kMaxExponentBits)) + 1
                  : (int64_t{1} << (i + kNonSignBits - kMaxExponentBits + 1)) + 1;
    const at::Tensor boundaries = at::linspace(0.1, 1.0, fraction_items, at::TensorOptions().dtype(at::kFloat));
    const at::Tensor means = (boundaries.slice(0, 0, fraction_items - 1) + boundaries.slice(0, 1)) / 2.0;
    // 10 ** (i - 6): a Python int for i = 6, else a double; ATen rounds the scalar to fp32 for the product.
    const int e = -(kMaxExponentBits - 1) + i;
    const at::Tensor pos = e == 0 ? means * int64_t{1} : means * std::pow(10.0, e);
    const float* pp = pos.contiguous().data_ptr<float>();
    for (int64_t k = 0; k < pos.numel(); ++k) data.push_back(pp[k]);
    if (is_signed) {
      const at::Tensor neg = e == 0 ? means * int64_t{-1} : means * -std::pow(10.0, e);
      const float* np = neg.contiguous().data_ptr<float>();
      for (int64_t k = 0; k < neg.numel(); ++k) data.push_back(np[k]);
    }
  }
  // additional_items = 2^(7 - 7) - 1 = 0: no extra linear region for 8 bits.
  data.push_back(0.0);
  data.push_back(1.0);
  while (data.size() < 256) data.push_back(0.0);
  std::sort(data.begin(), data.end());
  std::array<float, 256> out{};
  for (size_t k = 0; k < 256; ++k) out[k] = static_cast<float>(data[k]);
  return out;
}

}  // namespace

const std::array<float, 256>& dynamic_map(bool is_signed) {
  static const std::array<float, 256> signed_map = build_dynamic_map(true);
  static const std::array<float, 256> unsigned_map = build_dynamic_map(false);
  return is_signed ? signed_map : unsigned_map;
}

}  // namespace ftcore::plugins::blockwise8

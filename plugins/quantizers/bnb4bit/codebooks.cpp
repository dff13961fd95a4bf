// Code books and decision rules (see codebooks.h for the formats' sources).
#include "codebooks.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <ATen/ATen.h>

namespace ftcore::plugins::bnb4bit {
namespace {

// QLoRA's NF4 values (fp32), code 0..15.
constexpr std::array<float, 16> kNf4 = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

// FP4 magnitudes of the 3 non-sign bits (e2m1, bias 2), before normalizing by 12.
constexpr std::array<float, 8> kFp4Magnitude = {0.0f, 0.0625f, 8.0f, 12.0f, 4.0f, 6.0f, 2.0f, 3.0f};

std::array<float, 16> make_fp4() {
  std::array<float, 16> v{};
  for (int i = 0; i < 8; ++i) {
    v[i] = kFp4Magnitude[i] / 12.0f;
    // The sign bit's zero is +0 as well (bitsandbytes lists it as the integer -0).
    v[i + 8] = i == 0 ? 0.0f : -kFp4Magnitude[i] / 12.0f;
  }
  return v;
}

FourBitRule make_rule(const std::array<float, 16>& values) {
  std::array<uint8_t, 16> order{};
  for (int i = 0; i < 16; ++i) order[i] = static_cast<uint8_t>(i);
  // Ascending by value; equal values (FP4's two zeros) keep code order.
  std::stable_sort(order.begin(), order.end(), [&](uint8_t a, uint8_t b) { return values[a] < values[b]; });
  FourBitRule r{};
  r.code_of_bucket = order;
  for (int i = 0; i < 15; ++i) r.midpoints[i] = (values[order[i]] + values[order[i + 1]]) / 2.0f;
  return r;
}

// create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for each
// exponent e = 0..6, 2^e means of a linspace(0.1, 1, 2^e + 1) (fp32) scaled by
// 10^(e-6), both signs; plus 0 and 1. Built with ATen so the fp32 linspace
// and the scalar product round as they do there.
std::array<float, 256> make_dynamic_map() {
  std::vector<float> data;
  for (int e = 0; e < 7; ++e) {
    const int64_t items = (int64_t{1} << e) + 1;
    at::Tensor b = at::linspace(0.1, 1.0, items, at::kFloat);
    at::Tensor means = (b.slice(0, 0, items - 1) + b.slice(0, 1, items)) / 2.0;
    const double scale = std::pow(10.0, e - 6);
    at::Tensor pos = (means * scale).contiguous();
    at::Tensor neg = (means * -scale).contiguous();
    data.insert(data.end(), pos.data_ptr<float>(), pos.data_ptr<float>() + pos.numel());
    data.insert(data.end(), neg.data_ptr<float>(), neg.data_ptr<float>() + neg.numel());
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  std::array<float, 256> m{};
  std::copy(data.begin(), data.end(), m.begin());
  return m;
}

EightBitRule make_eight_bit_rule(const std::array<float, 256>& map) {
  EightBitRule r{};
  int j = 0;
  for (int k = 0; k < 65536; ++k) {
    const float p = static_cast<float>(k / 32767.5 - 1.0);
    // Walk right while the next value is strictly nearer (ties keep the lower index).
    while (j < 255 && std::fabs(p - map[j + 1]) < std::fabs(p - map[j])) ++j;
    r.code_of_point[k] = static_cast<uint8_t>(j);
  }
  return r;
}

}  // namespace

const char* quant_type_name(QuantType type) { return type == QuantType::NF4 ? "nf4" : "fp4"; }

const std::array<float, 16>& code_values(QuantType type) {
  static const std::array<float, 16> fp4 = make_fp4();
  return type == QuantType::NF4 ? kNf4 : fp4;
}

const FourBitRule& four_bit_rule(QuantType type) {
  static const FourBitRule nf4 = make_rule(code_values(QuantType::NF4));
  static const FourBitRule fp4 = make_rule(code_values(QuantType::FP4));
  return type == QuantType::NF4 ? nf4 : fp4;
}

const std::array<float, 256>& dynamic_map_signed() {
  static const std::array<float, 256> m = make_dynamic_map();
  return m;
}

const EightBitRule& eight_bit_rule() {
  static const EightBitRule r = make_eight_bit_rule(dynamic_map_signed());
  return r;
}

}  // namespace ftcore::plugins::bnb4bit

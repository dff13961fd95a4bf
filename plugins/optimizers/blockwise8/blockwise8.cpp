// Blockwise 8-bit quantize/dequantize (the rule is in blockwise8.h).
#include "blockwise8.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include "dynamic_map.h"

namespace ftcore::plugins::blockwise8 {
namespace {
#include "quantize_element.h"
}  // namespace

QuantMap make_quant_map(const std::array<float, 256>& code) {
  QuantMap m;
  m.code = code;
  std::array<float, 255> midpoints;
  for (int i = 0; i < 255; ++i) midpoints[i] = 0.5f * (code[i] + code[i + 1]);
  int c = 0;
  for (int k = 0; k < kLutSize; ++k) {
    const float grid = -1.0f + (2.0f * static_cast<float>(k)) / static_cast<float>(kLutSize - 1);
    while (c < 255 && midpoints[c] < grid) ++c;
    m.lut[k] = static_cast<uint8_t>(c);
  }
  if (m.lut[kLutSize - 1] != 255)
    throw std::invalid_argument("make_quant_map: the map's last midpoint is not below 1 (rounding table ends at code " +
                                std::to_string(m.lut[kLutSize - 1]) + ", expected 255)");
  std::array<uint16_t, 255> step_at;
  int k = 0;
  for (int i = 0; i < 255; ++i) {
    while (m.lut[k] <= i) ++k;  // ends: lut[65535] == 255 > i
    step_at[i] = static_cast<uint16_t>(k);
  }
  m.search_tree.fill(0);
  for (int l = 0; l < 8; ++l) {
    const int half = 128 >> l;  // the search's step at level l
    for (int r = 0; r < (1 << l); ++r) {
      int j = 0;  // the node: r's l bits reversed (the decisions so far, first one highest)
      for (int b = 0; b < l; ++b) j |= ((r >> b) & 1) << (l - 1 - b);
      m.search_tree[(1 << l) - 1 + r] = step_at[(2 * j + 1) * half - 1];
    }
  }
  return m;
}

const QuantMap& signed_quant_map() {
  static const QuantMap m = make_quant_map(dynamic_map(true));
  return m;
}

const QuantMap& unsigned_quant_map() {
  static const QuantMap m = make_quant_map(dynamic_map(false));
  return m;
}

void quantize_blockwise(const float* x, int64_t numel, int64_t blocksize, const QuantMap& map, uint8_t* codes,
                        float* absmax) {
  if (blocksize < 1) throw std::invalid_argument("quantize_blockwise: blocksize must be >= 1, got " + std::to_string(blocksize));
  for (int64_t b = 0; b * blocksize < numel; ++b) {
    const int64_t begin = b * blocksize, end = std::min(numel, begin + blocksize);
    float amax = 0.0f;
    for (int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    absmax[b] = amax;
    if (amax == 0.0f) {
      std::fill(codes + begin, codes + end, uint8_t{0});
      continue;
    }
    const float inv = 1.0f / amax;
    for (int64_t i = begin; i < end; ++i) codes[i] = quantize_element(map.lut.data(), x[i], inv);
  }
}

void dequantize_blockwise(const uint8_t* codes, const float* absmax, int64_t numel, int64_t blocksize,
                          const QuantMap& map, float* out) {
  if (blocksize < 1) throw std::invalid_argument("dequantize_blockwise: blocksize must be >= 1, got " + std::to_string(blocksize));
  for (int64_t i = 0; i < numel; ++i) out[i] = map.code[codes[i]] * absmax[i / blocksize];
}

std::pair<at::Tensor, at::Tensor> quantize_blockwise(const at::Tensor& x, int64_t blocksize, const QuantMap& map) {
  const at::Tensor xf = x.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor codes = at::empty(xf.sizes(), at::TensorOptions().dtype(at::kByte));
  at::Tensor absmax = at::empty({num_blocks(xf.numel(), blocksize)}, at::TensorOptions().dtype(at::kFloat));
  quantize_blockwise(xf.data_ptr<float>(), xf.numel(), blocksize, map, codes.data_ptr<uint8_t>(),
                     absmax.data_ptr<float>());
  return {codes, absmax};
}

at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, int64_t blocksize,
                                const QuantMap& map) {
  if (codes.scalar_type() != at::kByte)
    throw std::invalid_argument(std::string("dequantize_blockwise: codes must be uint8, got ") + c10::toString(codes.scalar_type()));
  const at::Tensor c = codes.to(at::kCPU).contiguous();
  const at::Tensor a = absmax.to(at::kCPU, at::kFloat).contiguous();
  if (a.numel() != num_blocks(c.numel(), blocksize))
    throw std::invalid_argument("dequantize_blockwise: absmax has " + std::to_string(a.numel()) + " blocks, expected " +
                                std::to_string(num_blocks(c.numel(), blocksize)) + " for " +
                                std::to_string(c.numel()) + " codes in blocks of " + std::to_string(blocksize));
  at::Tensor out = at::empty(c.sizes(), at::TensorOptions().dtype(at::kFloat));
  dequantize_blockwise(c.data_ptr<uint8_t>(), a.data_ptr<float>(), c.numel(), blocksize, map, out.data_ptr<float>());
  return out;
}

}  // namespace ftcore::plugins::blockwise8

// Blockwise 4-bit quantization and the nested 8-bit quantization of absmax,
// rounding as bitsandbytes' CPU path does (checked bit for bit by
// tests/reference/bnb4bit_reference.py):
//   full block:    s = 1 / max(absmax, 1e-38); x = clamp(w * s, -1, 1)
//   partial last:  a = max(absmax, 1e-38), stored as its absmax; x = clamp(w / a, -1, 1)
//   code:          FourBitRule (midpoints in fp32, ties to the lower bucket)
//   odd n:         the pad nibble is the code of 0.
//   nested:        offset = mean(absmax) (ATen's reduction); c = absmax - offset;
//                  per 256-block m = max|c|, x = c * (1 / m), EightBitRule.
#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "bnb4bit.h"
#include "ftcore/sdk/parallel.h"

namespace ftcore::plugins::bnb4bit {
namespace {

inline float nan_max(float m, float v) { return (v > m || std::isnan(v)) ? v : m; }

inline float clamp_unit(float x) {
  if (std::isnan(x)) return x;
  return x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x);
}

}  // namespace

void quantize_4bit(const at::Tensor& weight, QuantType type, int64_t blocksize, at::Tensor& packed,
                   at::Tensor& absmax) {
  const at::Tensor w = weight.contiguous().to(at::kFloat).reshape({-1});
  const int64_t n = w.numel();
  const int64_t blocks = (n + blocksize - 1) / blocksize;
  const int64_t full_blocks = n / blocksize;
  packed = at::empty({(n + 1) / 2}, w.options().dtype(at::kByte));
  absmax = at::empty({blocks}, w.options());
  const float* wp = w.data_ptr<float>();
  uint8_t* pp = packed.data_ptr<uint8_t>();
  float* ap = absmax.data_ptr<float>();
  const FourBitRule& rule = four_bit_rule(type);
  const uint8_t pad = rule.code(0.0f);
  sdk::parallel_for(0, blocks, 64, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * blocksize, end = std::min(n, begin + blocksize);
      float m = 0.0f;
      for (int64_t i = begin; i < end; ++i) m = nan_max(m, std::fabs(wp[i]));
      const bool partial = b >= full_blocks;
      const float clamped = std::isnan(m) ? m : std::max(m, 1e-38f);
      const float scale = 1.0f / clamped;
      ap[b] = partial ? clamped : m;
      // begin is even (block sizes are), so this block owns its bytes.
      for (int64_t i = begin; i < end; i += 2) {
        const float x0 = clamp_unit(partial ? wp[i] / clamped : wp[i] * scale);
        uint8_t lo = pad;
        if (i + 1 < end) lo = rule.code(clamp_unit(partial ? wp[i + 1] / clamped : wp[i + 1] * scale));
        pp[i / 2] = static_cast<uint8_t>((rule.code(x0) << 4) | lo);
      }
    }
  });
}

void quantize_nested(const at::Tensor& absmax, at::Tensor& codes, at::Tensor& nested_absmax, float& offset) {
  const at::Tensor a = absmax.contiguous();
  const at::Tensor mean = a.mean();
  offset = mean.item<float>();
  const at::Tensor centered = (a - mean).contiguous();
  const int64_t n = centered.numel();
  const int64_t blocks = (n + kNestedBlocksize - 1) / kNestedBlocksize;
  codes = at::empty({n}, a.options().dtype(at::kByte));
  nested_absmax = at::empty({blocks}, a.options());
  const float* cp = centered.data_ptr<float>();
  uint8_t* qp = codes.data_ptr<uint8_t>();
  float* mp = nested_absmax.data_ptr<float>();
  const EightBitRule& rule = eight_bit_rule();
  sdk::parallel_for(0, blocks, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kNestedBlocksize, end = std::min(n, begin + kNestedBlocksize);
      float m = 0.0f;
      for (int64_t i = begin; i < end; ++i) m = nan_max(m, std::fabs(cp[i]));
      mp[b] = m;
      const float scale = 1.0f / m;
      for (int64_t i = begin; i < end; ++i) qp[i] = rule.code(cp[i] * scale);
    }
  });
}

}  // namespace ftcore::plugins::bnb4bit

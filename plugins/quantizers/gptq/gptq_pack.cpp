// Bit-stream packing of GPTQ codes and zero points (layout in gptq_pack.h).
#include "gptq_pack.h"

#include <stdexcept>

#include <ATen/ATen.h>

#include "ftcore/sdk/parallel.h"

namespace ftcore::plugins::gptq {

bool supported_bits(int64_t bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 8; }

at::Tensor pack_rows(const at::Tensor& codes_in, int bits) {
  at::Tensor codes = codes_in.to(at::kInt).contiguous();
  const int64_t rows = codes.size(0), cols = codes.size(1);
  if ((rows * bits) % 32 != 0)
    throw std::invalid_argument("gptq: cannot pack " + std::to_string(rows) + " rows of " + std::to_string(bits) +
                                "-bit codes into whole int32 words");
  at::Tensor packed = at::zeros({rows * bits / 32, cols}, at::kInt);
  const uint32_t mask = (1u << bits) - 1u;
  const int32_t* src = codes.data_ptr<int32_t>();
  uint32_t* dst = reinterpret_cast<uint32_t*>(packed.data_ptr<int32_t>());
  sdk::parallel_for(0, cols, 256, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t bit = r * bits, word = bit / 32;
      const int shift = static_cast<int>(bit % 32);
      for (int64_t c = c0; c < c1; ++c) {
        const uint32_t v = static_cast<uint32_t>(src[r * cols + c]) & mask;
        dst[word * cols + c] |= v << shift;
        if (shift + bits > 32) dst[(word + 1) * cols + c] |= v >> (32 - shift);
      }
    }
  });
  return packed;
}

at::Tensor unpack_rows(const at::Tensor& packed_in, int bits, int64_t rows) {
  at::Tensor packed = packed_in.contiguous();
  const int64_t cols = packed.size(1);
  at::Tensor codes = at::empty({rows, cols}, at::kInt);
  const uint32_t mask = (1u << bits) - 1u;
  const uint32_t* src = reinterpret_cast<const uint32_t*>(packed.data_ptr<int32_t>());
  int32_t* dst = codes.data_ptr<int32_t>();
  sdk::parallel_for(0, rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bit = r * bits, word = bit / 32;
      const int shift = static_cast<int>(bit % 32);
      for (int64_t c = 0; c < cols; ++c) {
        uint32_t v = src[word * cols + c] >> shift;
        if (shift + bits > 32) v |= src[(word + 1) * cols + c] << (32 - shift);
        dst[r * cols + c] = static_cast<int32_t>(v & mask);
      }
    }
  });
  return codes;
}

at::Tensor pack_zeros(const at::Tensor& zeros, int bits) {
  const int64_t mask = (int64_t{1} << bits) - 1;
  at::Tensor stored = (zeros.to(at::kLong) - 1).bitwise_and(mask).to(at::kInt);
  return pack_rows(stored.t(), bits).t().contiguous();
}

at::Tensor unpack_zeros(const at::Tensor& qzeros, int bits, int64_t out) {
  const int64_t mask = (int64_t{1} << bits) - 1;
  at::Tensor stored = unpack_rows(qzeros.t(), bits, out).t();
  return (stored.to(at::kLong) + 1).bitwise_and(mask).to(at::kInt).contiguous();
}

}  // namespace ftcore::plugins::gptq

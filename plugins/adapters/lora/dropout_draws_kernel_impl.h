// dropout_draws_kernel.h's loop; dropout_draws_kernel_<isa>.cpp defines
// FTCORE_DROPOUT_DRAWS and FTCORE_DROPOUT_GRAD (the functions' names) and includes this file with its
// ISA's flags. Plain loops: each one is written so that GCC vectorises it.
#include <algorithm>

#include "dropout_draws_kernel.h"

namespace ftcore::plugins::lora {
namespace {

constexpr int kStateWords = at::MERSENNE_STATE_N;  // 624
constexpr int kShift = at::MERSENNE_STATE_M;       // 397

inline uint32_t twist(uint32_t u, uint32_t v) {
  return (((u & at::UMASK) | (v & at::LMASK)) >> 1) ^ ((v & 1u) ? at::MATRIX_A : 0u);
}

inline uint32_t temper(uint32_t y) {
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

// at::mt19937_engine::next_state: word i takes word i + 397, which for
// i >= 227 is a word this pass already replaced (227 words back, so 16-lane
// vectors never read a lane they write).
void regenerate(uint32_t* s) {
  for (int i = 0; i < kStateWords - kShift; ++i) s[i] = s[i + kShift] ^ twist(s[i], s[i + 1]);
  for (int i = kStateWords - kShift; i < kStateWords - 1; ++i)
    s[i] = s[i - (kStateWords - kShift)] ^ twist(s[i], s[i + 1]);
  s[kStateWords - 1] = s[kShift - 1] ^ twist(s[kStateWords - 1], s[0]);
}

// The next `count` outputs of the engine, as `count` calls of its
// operator() give them: left_ - 1 outputs remain before the next
// regeneration, read from state_[next_].
void next_outputs(at::mt19937_data_pod& st, uint32_t* out, int64_t count) {
  while (count > 0) {
    if (st.left_ == 1) {
      regenerate(st.state_.data());
      st.left_ = kStateWords + 1;  // operator() would decrement to 624 and then read word 0
      st.next_ = 0;
    }
    const int64_t take = std::min<int64_t>(count, st.left_ - 1);
    const uint32_t* words = st.state_.data() + st.next_;
    for (int64_t k = 0; k < take; ++k) out[k] = temper(words[k]);
    st.next_ += static_cast<uint32_t>(take);
    st.left_ -= static_cast<int>(take);
    out += take;
    count -= take;
  }
}

}  // namespace

void FTCORE_DROPOUT_DRAWS(at::mt19937_data_pod& state, const float* x, int64_t n, uint64_t threshold, float kept_value,
                          float* y, bool* mask) {
  constexpr int64_t kChunk = 1024;  // elements per batch of outputs (8 KiB on the stack)
  constexpr uint32_t kHigh21 = (1u << 21) - 1;  // (first << 32 | second) & (2^53 - 1): 21 bits of the first
  uint32_t words[2 * kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    next_outputs(state, words, 2 * m);
    const float* xs = x + start;
    float* ys = y + start;
    bool* ms = mask + start;
    for (int64_t i = 0; i < m; ++i) {
      const uint64_t bits = (static_cast<uint64_t>(words[2 * i] & kHigh21) << 32) | words[2 * i + 1];
      const bool keep = bits < threshold;
      ms[i] = keep;
      ys[i] = xs[i] * (keep ? kept_value : 0.0f);
    }
  }
}

void FTCORE_DROPOUT_GRAD(const float* grad, const bool* mask, float kept_value, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = grad[i] * (mask[i] ? kept_value : 0.0f);
}

}  // namespace ftcore::plugins::lora

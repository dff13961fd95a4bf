// Text generation with the KV cache: greedy decoding or sampling with
// temperature, top-k and top-p (in transformers' order: temperature, then
// top-k, then top-p), seeded; each new token goes to a callback as soon as it
// is chosen, so a caller can stream it. Several prompts decode as one batch
// (left-padded, as transformers' batched generate), each row stopping on its
// own.
//
// Shapes: B prompts, V vocabulary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "ftcore/model.h"

namespace ftcore {

struct SamplingOptions {
  int64_t max_new_tokens = 128;
  double temperature = 0.0;  // 0: greedy (argmax); > 0: sample from softmax(logits / T)
  int64_t top_k = 0;         // 0: off; keep the k most likely tokens
  double top_p = 1.0;        // 1: off; keep the smallest set whose probability reaches p
  uint64_t seed = 0;
  std::vector<int64_t> stop_token_ids;  // generation ends after emitting one of these

  bool greedy() const { return temperature <= 0.0; }
};

enum class StopReason { MaxNewTokens, StopToken, Callback };

struct GenerationResult {
  std::vector<int64_t> tokens;  // new tokens only (a stop token included)
  StopReason reason = StopReason::MaxNewTokens;
};

// Called with each new token; return false to stop.
using TokenCallback = std::function<bool(int64_t token)>;
// Called with each new token of row `row` of a batch; return false to stop that row.
using BatchTokenCallback = std::function<bool(size_t row, int64_t token)>;

// Checks the options (temperature >= 0, top_k >= 0, 0 < top_p <= 1,
// max_new_tokens >= 0); throws std::invalid_argument naming the bad one.
void validate_sampling_options(const SamplingOptions& options);

// Logits [V] (any float dtype) -> fp32 logits with removed tokens at -inf,
// after temperature, top-k and top-p as transformers' logits warpers do.
at::Tensor warp_logits(const at::Tensor& logits, const SamplingOptions& options);
// The next token from logits [V]: argmax when greedy, else a draw from the warped distribution.
int64_t choose_token(const at::Tensor& logits, const SamplingOptions& options, at::Generator& generator);

// Generates after `prompt` (token ids, at least one) with one KV cache: the
// prompt in one forward, then one token per forward.
GenerationResult generate(Model& model, const std::vector<int64_t>& prompt, const SamplingOptions& options,
                          const TokenCallback& on_token = {});

// Generates after every prompt in one batch: the prompts left-padded to the
// longest and run in one forward that fills one KV cache [B, ...], then one
// forward of B new tokens per step. A row that emitted a stop token, reached
// max_new_tokens or was stopped by the callback is finished: it is fed
// padding (masked, so it changes no other row) until every row is. Greedy
// rows give the tokens each prompt gives alone (up to float rounding of the
// batched matmuls); sampling draws the rows in order from one generator, so
// a seed replays a batch but not the same prompts one at a time.
std::vector<GenerationResult> generate_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                             const SamplingOptions& options, const BatchTokenCallback& on_token = {});

}  // namespace ftcore

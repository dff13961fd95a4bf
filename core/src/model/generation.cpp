// Decoding (model_generation.h): the prompt in one forward that fills the
// KV cache, then one single-token forward per new token. Token choice
// follows transformers: greedy is argmax of the fp32 logits; sampling warps
// them with temperature, then top-k, then top-p (TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper, in that order) and draws from the
// softmax with a generator seeded from the options, so a seed replays a run.
//
// Shapes: V vocabulary.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "ftcore/model_generation.h"
#include "ftcore/stop_request.h"

namespace ftcore {

void validate_sampling_options(const SamplingOptions& o) {
  if (o.max_new_tokens < 0)
    throw std::invalid_argument("max_new_tokens must be >= 0, got " + std::to_string(o.max_new_tokens));
  if (!(o.temperature >= 0.0) || std::isinf(o.temperature))
    throw std::invalid_argument("temperature must be >= 0 (0 = greedy), got " + std::to_string(o.temperature));
  if (o.top_k < 0) throw std::invalid_argument("top_k must be >= 0 (0 = off), got " + std::to_string(o.top_k));
  if (!(o.top_p > 0.0 && o.top_p <= 1.0))
    throw std::invalid_argument("top_p must be in (0, 1] (1 = off), got " + std::to_string(o.top_p));
}

at::Tensor warp_logits(const at::Tensor& logits, const SamplingOptions& o) {
  TORCH_CHECK(logits.dim() == 1, "warp_logits takes logits [V], got ", logits.sizes());
  const double removed = -std::numeric_limits<double>::infinity();
  at::Tensor scores = logits.to(at::kFloat);
  if (o.greedy()) return scores;
  scores = scores / o.temperature;
  if (o.top_k > 0) {
    // Remove everything below the k-th largest score (ties with it stay).
    const int64_t k = std::min<int64_t>(o.top_k, scores.size(0));
    at::Tensor kth = std::get<0>(at::topk(scores, k)).narrow(0, k - 1, 1);
    scores = scores.masked_fill(scores.lt(kth), removed);
  }
  if (o.top_p < 1.0) {
    // Ascending order: drop the least likely tokens while their cumulative
    // probability stays <= 1 - p; the most likely token always stays.
    auto [sorted, order] = at::sort(scores, /*dim=*/0, /*descending=*/false);
    at::Tensor drop_sorted = sorted.softmax(0).cumsum(0).le(1.0 - o.top_p);
    drop_sorted.narrow(0, drop_sorted.size(0) - 1, 1).fill_(false);
    at::Tensor drop = drop_sorted.scatter(0, order, drop_sorted);
    scores = scores.masked_fill(drop, removed);
  }
  return scores;
}

int64_t choose_token(const at::Tensor& logits, const SamplingOptions& o, at::Generator& generator) {
  if (o.greedy()) return logits.to(at::kFloat).argmax().item<int64_t>();
  at::Tensor probs = warp_logits(logits, o).softmax(0).to(at::kCPU);
  return at::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>();
}

GenerationResult generate(Model& model, const std::vector<int64_t>& prompt, const SamplingOptions& o,
                          const TokenCallback& on_token) {
  validate_sampling_options(o);
  if (prompt.empty()) throw std::invalid_argument("generate needs a prompt of at least one token");
  const int64_t vocab = model.config().vocab_size;
  for (int64_t id : prompt)
    if (id < 0 || id >= vocab)
      throw std::invalid_argument("prompt token " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(vocab) + ")");
  GenerationResult result;
  if (o.max_new_tokens == 0) return result;

  at::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  KVCache cache;
  ForwardInput in;
  in.cache = &cache;
  in.logits_to_keep = 1;  // only the last position's logits are needed
  in.input_ids = at::tensor(prompt, at::kLong).unsqueeze(0);  // [1, T]
  while (true) {
    throw_if_stop_requested("generation");
    at::Tensor logits = model.forward(in).select(0, 0).select(0, -1).to(at::kCPU, at::kFloat);  // [V]
    const int64_t token = choose_token(logits, o, generator);
    result.tokens.push_back(token);
    if (on_token && !on_token(token)) {
      result.reason = StopReason::Callback;
      break;
    }
    if (std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), token) != o.stop_token_ids.end()) {
      result.reason = StopReason::StopToken;
      break;
    }
    if (static_cast<int64_t>(result.tokens.size()) >= o.max_new_tokens) {
      result.reason = StopReason::MaxNewTokens;
      break;
    }
    in.input_ids = at::full({1, 1}, token, at::kLong);
    // longrope switches to its long factors once the sequence passes the
    // original context; the keys cached under the short ones are then
    // recomputed once, as transformers' Phi3ForCausalLM does in generation.
    const RopeConfig& rope = model.config().rope;
    const int64_t total = static_cast<int64_t>(prompt.size() + result.tokens.size());
    if (rope.type == "longrope" && total > rope.original_max_position_embeddings &&
        cache.length() <= rope.original_max_position_embeddings) {
      std::vector<int64_t> sequence = prompt;
      sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
      cache.clear();
      in.input_ids = at::tensor(sequence, at::kLong).unsqueeze(0);
    }
  }
  return result;
}

}  // namespace ftcore

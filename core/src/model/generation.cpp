// Decoding (model_generation.h): the prompts, left-padded into one batch,
// in one forward that fills the KV cache, then one forward of one new token
// per row per step (a single prompt is a batch of one). Token choice
// follows transformers: greedy is argmax of the fp32 logits; sampling warps
// them with temperature, then top-k, then top-p (TemperatureLogitsWarper,
// TopKLogitsWarper, TopPLogitsWarper, in that order) and draws from the
// softmax with a generator seeded from the options, so a seed replays a run.
//
// Shapes: B prompts, L the longest prompt, V vocabulary.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

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

namespace {

void check_prompt(const std::vector<int64_t>& prompt, size_t row, size_t rows, int64_t vocab) {
  const std::string which = rows > 1 ? "prompt " + std::to_string(row) : "the prompt";
  if (prompt.empty()) throw std::invalid_argument("generate needs a prompt of at least one token (" + which + " is empty)");
  for (int64_t id : prompt)
    if (id < 0 || id >= vocab)
      throw std::invalid_argument(which + ": token " + std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(vocab) + ")");
}

// The prompts right-aligned in [B, L] (L the longest): padding (id 0, mask 0)
// on the left, so every row's last prompt token is the batch's last column
// and the next tokens of all rows line up after it.
std::pair<at::Tensor, at::Tensor> left_pad(const std::vector<std::vector<int64_t>>& prompts, int64_t longest) {
  const auto rows = static_cast<int64_t>(prompts.size());
  at::Tensor ids = at::zeros({rows, longest}, at::kLong), mask = at::zeros({rows, longest}, at::kLong);
  auto id = ids.accessor<int64_t, 2>();
  auto real = mask.accessor<int64_t, 2>();
  for (int64_t b = 0; b < rows; ++b) {
    const auto& prompt = prompts[static_cast<size_t>(b)];
    const int64_t offset = longest - static_cast<int64_t>(prompt.size());
    for (size_t t = 0; t < prompt.size(); ++t) {
      id[b][offset + static_cast<int64_t>(t)] = prompt[t];
      real[b][offset + static_cast<int64_t>(t)] = 1;
    }
  }
  return {ids, mask};
}

}  // namespace

GenerationResult generate(Model& model, const std::vector<int64_t>& prompt, const SamplingOptions& o,
                          const TokenCallback& on_token) {
  BatchTokenCallback row_callback;
  if (on_token) row_callback = [&on_token](size_t, int64_t token) { return on_token(token); };
  return generate_batch(model, {prompt}, o, row_callback).front();
}

std::vector<GenerationResult> generate_batch(Model& model, const std::vector<std::vector<int64_t>>& prompts,
                                             const SamplingOptions& o, const BatchTokenCallback& on_token) {
  validate_sampling_options(o);
  if (prompts.empty()) throw std::invalid_argument("generate_batch needs at least one prompt");
  int64_t longest = 0;
  bool padded = false;  // prompts of different lengths: the forward needs the padding mask
  for (size_t b = 0; b < prompts.size(); ++b) {
    check_prompt(prompts[b], b, prompts.size(), model.config().vocab_size);
    const auto length = static_cast<int64_t>(prompts[b].size());
    padded = padded || (b > 0 && length != longest);
    longest = std::max(longest, length);
  }
  const auto rows = static_cast<int64_t>(prompts.size());
  std::vector<GenerationResult> results(prompts.size());
  if (o.max_new_tokens == 0) return results;

  at::NoGradGuard no_grad;
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(o.seed);
  KVCache cache;
  ForwardInput in;
  in.cache = &cache;
  in.logits_to_keep = 1;  // only the last position's logits are needed
  auto [prompt_ids, prompt_mask] = left_pad(prompts, longest);
  in.input_ids = prompt_ids;
  // Unpadded prompts go without a mask: the model's plain causal fast path.
  if (padded) in.attention_mask = prompt_mask;
  // Everything fed so far, for the longrope recompute below.
  std::vector<at::Tensor> fed_ids = {prompt_ids}, fed_mask = {prompt_mask};
  std::vector<bool> running(prompts.size(), true);
  int64_t remaining = rows, steps = 0;
  while (true) {
    throw_if_stop_requested("generation");
    const at::Tensor logits = model.forward(in).select(1, -1).to(at::kCPU, at::kFloat);  // [B, V]
    // Greedy: one argmax over the batch (first maximum on ties, as the [V] case).
    const at::Tensor greedy = o.greedy() ? logits.argmax(-1).contiguous() : at::Tensor();
    ++steps;
    // Finished rows are fed padding (token 0, mask 0): it attends only itself.
    at::Tensor next_ids = at::zeros({rows, 1}, at::kLong), next_mask = at::zeros({rows, 1}, at::kLong);
    auto next_id = next_ids.accessor<int64_t, 2>();
    auto next_real = next_mask.accessor<int64_t, 2>();
    for (int64_t b = 0; b < rows; ++b) {
      const auto row = static_cast<size_t>(b);
      if (!running[row]) continue;
      const int64_t token = o.greedy() ? greedy.data_ptr<int64_t>()[b] : choose_token(logits[b], o, generator);
      GenerationResult& r = results[row];
      r.tokens.push_back(token);
      bool done = true;
      if (on_token && !on_token(row, token))
        r.reason = StopReason::Callback;
      else if (std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), token) != o.stop_token_ids.end())
        r.reason = StopReason::StopToken;
      else if (steps >= o.max_new_tokens)
        r.reason = StopReason::MaxNewTokens;
      else
        done = false;
      if (done) {
        running[row] = false;
        --remaining;
      } else {
        next_id[b][0] = token;
        next_real[b][0] = 1;
      }
    }
    if (remaining == 0) break;
    in.input_ids = next_ids;
    in.attention_mask = remaining < rows ? next_mask : at::Tensor();
    // longrope switches to its long factors once the sequence passes the
    // original context; the keys cached under the short ones are then
    // recomputed once, as transformers' Phi3ForCausalLM does in generation.
    // The longest row decides, as the longest position does in a forward.
    const RopeConfig& rope = model.config().rope;
    if (rope.type == "longrope" && longest + steps > rope.original_max_position_embeddings &&
        cache.length() <= rope.original_max_position_embeddings) {
      cache.clear();
      std::vector<at::Tensor> all_ids = fed_ids, all_mask = fed_mask;
      all_ids.push_back(next_ids);
      all_mask.push_back(next_mask);
      in.input_ids = at::cat(all_ids, 1);
      in.attention_mask = padded || remaining < rows ? at::cat(all_mask, 1) : at::Tensor();
    }
    fed_ids.push_back(next_ids);
    fed_mask.push_back(next_mask);
  }
  return results;
}

}  // namespace ftcore

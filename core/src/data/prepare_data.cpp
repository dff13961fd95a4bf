// prepare_data: rows -> examples (bad rows reported or skipped), a seeded
// train/validation split, and the tokenized cache.
#include <algorithm>
#include <cmath>
#include <random>

#include <spdlog/spdlog.h>

#include "example_cache.h"
#include "ftcore/dataset.h"
#include "ftcore/hash.h"
#include "ftcore/stop_request.h"
#include "prompt_formats.h"
#include "rows.h"
#include "tokenize_example.h"

namespace fs = std::filesystem;

namespace ftcore {

int64_t Example::target_tokens() const {
  return std::count_if(labels.begin(), labels.end(), [](int32_t l) { return l != kIgnoreLabel; });
}

DataConfig DataConfig::from_options(const sdk::Options& data, const sdk::Options& model, const sdk::Options& train) {
  DataConfig c;
  c.path = data.get_string("path");
  c.format = data.get_string("format");
  c.field = data.get_string("field");
  if (data.has_value("template")) c.prompt_template = data.get_string("template");
  c.train_on_inputs = data.get_bool("train_on_inputs");
  c.sequence_len = data.get_int("sequence_len");
  c.val_set_size = data.get_float("val_set_size");
  if (data.has_value("dataset_prepared_path")) c.dataset_prepared_path = data.get_string("dataset_prepared_path");
  c.skip_bad_rows = data.get_bool("skip_bad_rows");
  if (model.has_value("chat_template")) c.chat_template = model.get_string("chat_template");
  c.enable_thinking = model.get_bool("enable_thinking");
  c.seed = static_cast<uint64_t>(train.get_int("seed"));
  return c;
}

namespace {

// Everything the tokenized result depends on, hashed.
std::string cache_key(const DataConfig& c, const fs::path& tokenizer_file) {
  Sha256 h;
  h.update("ftcore-data-v1\n");
  h.update(sha256_file(c.path));
  h.update(tokenizer_file.empty() ? std::string("no-tokenizer-file") : sha256_file(tokenizer_file));
  for (const std::string& part : {c.format, c.field, c.prompt_template, c.chat_template, std::to_string(c.enable_thinking),
                                  std::to_string(c.train_on_inputs), std::to_string(c.sequence_len),
                                  std::to_string(c.val_set_size), std::to_string(c.seed)})
    h.update(part).update("\x1f", 1);
  return h.hex_digest();
}

// Uniform in [0, bound) from a fully specified generator (std's
// distributions differ between standard libraries; this does not).
uint64_t uniform_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % bound;
}

void split_validation(std::vector<Example>& all, const DataConfig& c, PreparedData& out) {
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 rng(c.seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[uniform_below(rng, i)]);
  const size_t validation = static_cast<size_t>(std::llround(c.val_set_size * static_cast<double>(all.size())));
  std::vector<bool> is_validation(all.size(), false);
  for (size_t k = 0; k < validation; ++k) is_validation[order[k]] = true;
  for (size_t i = 0; i < all.size(); ++i) (is_validation[i] ? out.validation : out.train).push_back(std::move(all[i]));
}

// An example whose target tokens were all cut by sequence_len (or that has
// none) adds nothing to the loss; a run made only of such examples would
// report success after training nothing. They are left out and counted.
void drop_examples_without_targets(std::vector<Example>& examples, const DataConfig& c, PreparedData& out) {
  const size_t before = examples.size();
  if (before == 0) throw DataError(c.path.string() + ": the data file holds no rows");
  examples.erase(std::remove_if(examples.begin(), examples.end(), [](const Example& e) { return e.target_tokens() == 0; }),
                 examples.end());
  out.without_targets = static_cast<int64_t>(before - examples.size());
  const std::string where = "within sequence_len = " + std::to_string(c.sequence_len) +
                            (c.train_on_inputs ? "" : " (prompt tokens are masked: train_on_inputs = false)");
  if (examples.empty())
    throw DataError(c.path.string() + ": none of the " + std::to_string(before) + " examples has a target token " + where);
  if (out.without_targets)
    spdlog::warn("{}: left out {} of {} examples with no target token {}", c.path.string(), out.without_targets, before,
                 where);
}

}  // namespace

PreparedData prepare_data(const DataConfig& config, const Tokenizer& tokenizer, const fs::path& tokenizer_file) {
  PreparedData out;
  out.cache_key = cache_key(config, tokenizer_file);
  const fs::path cache_file =
      config.dataset_prepared_path.empty() ? fs::path() : fs::path(config.dataset_prepared_path) / (out.cache_key + ".safetensors");
  if (!cache_file.empty() && fs::exists(cache_file)) {
    data::load_cache(cache_file, out);
    out.from_cache = true;
    return out;
  }
  std::optional<ChatTemplate> chat;
  if (config.format == "chat") {
    const std::string& chosen = config.chat_template.empty() ? tokenizer.chat_template() : config.chat_template;
    if (chosen.empty()) throw DataError(config.path.string() + ": the chat format needs a chat template; the tokenizer has none, set [model] chat_template");
    ChatOptions options;
    options.enable_thinking = config.enable_thinking;
    try {
      chat = ChatTemplate::from_name(chosen, options);
    } catch (const TokenizerError&) {
      chat = ChatTemplate::from_text(chosen, options);
    }
  }
  std::vector<Example> examples;
  for (const data::Row& row : data::read_rows(config.path)) {
    throw_if_stop_requested("data preparation");
    ++out.rows;
    try {
      if (!row.error.empty()) throw DataError(row.error);
      auto segments = data::render_row(row.value, config, chat ? &*chat : nullptr, tokenizer);
      data::TokenizeResult r = data::tokenize_segments(segments, tokenizer, config);
      r.example.source_line = row.line;
      out.truncated += r.truncated;
      examples.push_back(std::move(r.example));
    } catch (const DataError& e) {
      const std::string message = config.path.string() + ":" + std::to_string(row.line) + ": " + e.what();
      if (!config.skip_bad_rows) throw DataError(message);
      ++out.skipped_rows;
      spdlog::warn("skipping bad row {}", message);
    }
  }
  if (out.skipped_rows) spdlog::info("{}: skipped {} bad rows of {}", config.path.string(), out.skipped_rows, out.rows);
  drop_examples_without_targets(examples, config, out);
  split_validation(examples, config, out);
  if (out.train.empty())
    throw DataError(fmt::format("{}: val_set_size = {} holds out all {} examples, leaving none to train on",
                                config.path.string(), config.val_set_size, out.validation.size()));
  if (!cache_file.empty()) data::save_cache(cache_file, out);
  return out;
}

}  // namespace ftcore

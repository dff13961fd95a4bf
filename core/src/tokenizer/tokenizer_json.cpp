// tokenizer.json's root, BPE model and added tokens -> TokenizerParts. The
// order follows HF's loader: components first, then the added tokens, whose
// normalized forms need the normalizer. "truncation" and "padding" are left
// to the data pipeline (transformers' tokenizer(...) ignores them too), and
// an added token's "id" is recomputed as HF's loader recomputes it.
#include "tokenizer_json.h"

#include <stdexcept>

namespace ftcore::tokenizer {

namespace {

std::unique_ptr<BpeModel> parse_bpe_model(const JsonFields& node) {
  if (!node.node().is_object()) node.fail("expected an object");
  const std::string type = node.has("type") ? node.type() : (node.has("merges") ? "BPE" : "(untyped)");
  if (type != "BPE") node.unsupported("model", type, "BPE");
  if (node.has("dropout")) {
    const auto& dropout = node.node().at("dropout");
    if (!dropout.is_number() || dropout.get<double>() != 0.0) node.fail("BPE dropout is not supported (it must be null or 0)");
  }

  BpeOptions options;
  if (node.has("unk_token")) options.unk_token = node.string("unk_token");
  if (node.has("continuing_subword_prefix")) options.continuing_subword_prefix = node.string("continuing_subword_prefix");
  if (node.has("end_of_word_suffix")) options.end_of_word_suffix = node.string("end_of_word_suffix");
  options.fuse_unk = node.boolean("fuse_unk", false);
  options.byte_fallback = node.boolean("byte_fallback", false);
  options.ignore_merges = node.boolean("ignore_merges", false);

  const JsonFields vocab_node = node.child("vocab");
  if (!vocab_node.node().is_object()) vocab_node.fail("expected an object of token -> id");
  StringMap<int32_t> vocab;
  vocab.reserve(vocab_node.node().size());
  for (const auto& [token, id] : vocab_node.node().items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      vocab_node.fail("the id of '" + token + "' must be a non-negative 32-bit integer");
    vocab[token] = id.get<int32_t>();
  }

  // Merges: "a b" strings (split on the one space; "#version" lines skipped) or [a, b] pairs.
  const JsonFields merges_node = node.child("merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_node.array_size());
  for (size_t i = 0; i < merges_node.array_size(); ++i) {
    const auto& m = merges_node.node().at(i);
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      if (line.starts_with("#version")) continue;
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
        merges_node.element(i).fail("merge '" + line + "' is not two tokens separated by one space");
      merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      merges_node.element(i).fail("a merge must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  try {
    return std::make_unique<BpeModel>(std::move(vocab), merges, std::move(options));
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

std::vector<AddedToken> parse_added_tokens(const JsonFields& node) {
  std::vector<AddedToken> tokens;
  for (size_t i = 0; i < node.array_size(); ++i) {
    const JsonFields t = node.element(i);
    AddedToken token;
    token.content = t.string("content");
    token.special = t.boolean("special", false);
    token.single_word = t.boolean("single_word", false);
    token.lstrip = t.boolean("lstrip", false);
    token.rstrip = t.boolean("rstrip", false);
    token.normalized = t.boolean("normalized", !token.special);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace

TokenizerParts parse_tokenizer_json(const nlohmann::json& root, const std::string& source) {
  const JsonFields top(root, source, "tokenizer.json");
  if (!root.is_object()) top.fail("expected a JSON object, got " + std::string(root.type_name()));
  if (top.has("version") && top.string("version") != "1.0")
    top.fail("version '" + top.string("version") + "' is not supported (1.0 is)");
  auto section = [&](const char* key) {
    static const nlohmann::json null_json;
    return root.contains(key) ? JsonFields(root.at(key), source, key) : JsonFields(null_json, source, key);
  };
  TokenizerParts parts;
  try {
    if (!top.has("model")) top.fail("no \"model\"");
    parts.model = parse_bpe_model(section("model"));
    parts.normalizer = parse_normalizer(section("normalizer"));
    parts.pre_tokenizer = parse_pre_tokenizer(section("pre_tokenizer"));
    parts.post_processor = parse_post_processor(section("post_processor"));
    parts.decoder = parse_decoder(section("decoder"));
    if (top.has("added_tokens")) parts.added.add(parse_added_tokens(section("added_tokens")), *parts.model, parts.normalizer.get());
  } catch (const nlohmann::json::exception& e) {
    throw TokenizerError(source + ": malformed tokenizer.json: " + e.what());
  }
  return parts;
}

}  // namespace ftcore::tokenizer

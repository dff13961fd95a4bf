#include "gguf_sentencepiece.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "../tokenizer/utf8.h"

namespace ftcore {

namespace {

using nlohmann::ordered_json;
using gguf_vocab::TokenIds;
using gguf_vocab::Vocabulary;

constexpr const char* kSpace = "\u2581";  // SentencePiece's "▁"

struct Flavour {
  const char* tokenizer_class;
  // The tokens the transformers class registers as special when it is built,
  // whichever the file names (its constructor's defaults).
  std::vector<std::string> class_special_tokens;
  bool gemma = false;
  bool prepend_by_normalizer = false;  // phi3
};

Flavour flavour_of(const std::string& architecture) {
  if (architecture == "gemma" || architecture == "gemma2" || architecture == "gemma3")
    return {"GemmaTokenizer", {"<unk>", "<bos>", "<eos>", "<pad>", "<mask>"}, true, false};
  // The class transformers gives a GGUF Llama or Phi-3 tokenizer: it loads
  // tokenizer.json as it is (LlamaTokenizer would rebuild its own pipeline,
  // not Phi-3's); the special tokens are LlamaTokenizer's, which builds it.
  return {"TokenizersBackend", {"<unk>", "<s>", "</s>"}, false, architecture == "phi3"};
}

ordered_json string_pattern(const std::string& s) { return {{"String", s}}; }

ordered_json replace(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", string_pattern(from)}, {"content", to}};
}

ordered_json normalizer(const Flavour& f) {
  if (f.gemma) return replace(" ", kSpace);
  if (f.prepend_by_normalizer)
    return {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace(" ", kSpace)}}};
  return nullptr;
}

ordered_json pre_tokenizer(const Flavour& f) {
  // Gemma's Split on " " finds none after its normalizer; kept as transformers has it.
  if (f.gemma)
    return {{"type", "Split"}, {"pattern", string_pattern(" ")}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  if (f.prepend_by_normalizer) return nullptr;
  return {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}, {"split", false}};
}

ordered_json decoder(const Flavour& f) {
  ordered_json steps = {replace(kSpace, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
  // The prefix space the pipeline added, taken off again (Gemma adds none).
  if (!f.gemma) steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", steps}};
}

size_t code_points(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) pos += tokenizer::utf8_length(static_cast<unsigned char>(s[pos]));
  return n;
}

// Gemma files store a token of two or more spaces as the spaces; the
// normalizer turns text spaces into "▁", so the vocabulary must spell it so.
// (transformers' rule: holds a space and nothing but Python whitespace.)
std::string gemma_spelling(const std::string& token) {
  if (token.find(' ') == std::string::npos || !tokenizer::python_strip(token).empty()) return token;
  std::string out;
  for (size_t n = code_points(token); n > 0; --n) out += kSpace;
  return out;
}

// transformers' generate_merges: each token (in the order it first appears;
// scored as its last occurrence, as a dict built from the list keeps) gives
// a merge for every split into a left and right piece that are both tokens,
// those of one token ordered by the pieces' ids; then all ranked by score,
// higher first, then longer left piece, then longer right piece (lengths in
// code points), ties kept in that order (Python's sort is stable).
ordered_json merges_from_vocabulary(const std::vector<std::string>& tokens, const TokenIds& ids,
                                    const std::vector<double>& rank_score) {
  struct Merge {
    std::string_view left, right;
    double score;
    size_t left_length, right_length;
    int64_t left_id, right_id;
  };
  std::vector<Merge> merges, local;
  std::unordered_set<std::string_view> seen;
  for (const std::string& token : tokens) {
    if (!seen.insert(token).second) continue;
    const double score = rank_score[static_cast<size_t>(ids.find(token))];
    const std::string_view t = token;
    const size_t length = code_points(t);
    if (length < 2) continue;
    local.clear();
    size_t pos = tokenizer::utf8_length(static_cast<unsigned char>(t[0]));
    for (size_t left_length = 1; left_length < length; ++left_length) {
      const std::string_view left = t.substr(0, pos), right = t.substr(pos);
      const int64_t left_id = ids.find(left), right_id = ids.find(right);
      if (left_id >= 0 && right_id >= 0) local.push_back({left, right, score, left_length, length - left_length, left_id, right_id});
      pos += tokenizer::utf8_length(static_cast<unsigned char>(t[pos]));
    }
    std::stable_sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return std::tie(a.left_id, a.right_id) < std::tie(b.left_id, b.right_id);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(a.score, a.left_length, a.right_length) > std::tie(b.score, b.left_length, b.right_length);
  });
  ordered_json out = ordered_json::array();
  auto& list = out.get_ref<ordered_json::array_t&>();
  list.reserve(merges.size());
  // Pairs, not "left right" strings: a piece may hold a space.
  for (const Merge& m : merges) list.push_back(ordered_json::array({std::string(m.left), std::string(m.right)}));
  return out;
}

ordered_json merges(const gguf::File& file, const Flavour& f, const std::vector<std::string>& tokens,
                    const TokenIds& ids) {
  if (const gguf::Value* listed = file.find_metadata("tokenizer.ggml.merges")) {
    ordered_json out = ordered_json::array();
    for (const std::string& m : listed->strings) out.push_back(m);
    return out;
  }
  std::vector<double> rank_score(tokens.size());
  if (f.gemma) {
    // Gemma's scores do not follow its merge order; the file's token order does.
    for (size_t id = 0; id < tokens.size(); ++id) rank_score[id] = -static_cast<double>(id);
  } else {
    rank_score = gguf_vocab::read_scores(file, tokens.size());
  }
  return merges_from_vocabulary(tokens, ids, rank_score);
}

// The added tokens, as transformers registers them: the class's special
// tokens, control tokens (special), user-defined ones (not special), the
// special tokens the file names. Special sticks: a token once registered
// special is skipped when decoding with skip_special_tokens even after a
// registration as user-defined (Gemma's "<mask>"). A name absent from the
// vocabulary is left out (transformers would append it with an id past the
// vocabulary, which the model has no embedding for).
ordered_json added_tokens(const gguf::File& file, const Flavour& f, const Vocabulary& vocab, const TokenIds& ids) {
  struct Added {
    int64_t id;
    bool special;
  };
  std::unordered_map<std::string, Added> added;
  auto add = [&](const std::string& content, bool special) {
    const int64_t id = ids.find(content);
    if (id < 0) return;
    auto it = added.try_emplace(content, Added{id, special}).first;
    it->second.special = it->second.special || special;
  };
  for (const std::string& t : f.class_special_tokens) add(t, true);
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.types[id] != gguf_vocab::kControl) continue;
    if (ids.find(vocab.tokens[id]) < 0)
      throw std::runtime_error(file.path().string() + ": tokenizer.ggml.tokens[" + std::to_string(id) +
                               "] is a control token of spaces only, which a Gemma vocabulary respells");
    add(vocab.tokens[id], true);
  }
  for (size_t id = 0; id < vocab.tokens.size(); ++id)
    if (vocab.types[id] == gguf_vocab::kUserDefined) add(vocab.tokens[id], false);
  for (const char* key : {"bos_token_id", "eos_token_id", "unknown_token_id", "padding_token_id"}) {
    const std::string t = gguf_vocab::named_token(file, vocab.tokens, key);
    if (!t.empty()) add(t, true);
  }
  std::vector<std::pair<std::string, Added>> sorted(added.begin(), added.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.id < b.second.id; });
  ordered_json out = ordered_json::array();
  for (const auto& [content, a] : sorted) out.push_back(gguf_vocab::added_token_json(a.id, content, a.special, false));
  return out;
}

bool flag(const gguf::File& file, const char* key, bool fallback) {
  const gguf::Value* v = file.find_metadata(std::string("tokenizer.ggml.") + key);
  return v ? v->b : fallback;
}

// What transformers' update_post_processor writes: "<bos> $A <eos>" as the
// flags say, for a single sequence and for a pair.
ordered_json post_processor(const gguf::File& file, const std::vector<std::string>& tokens, const TokenIds& ids) {
  const std::string bos = gguf_vocab::named_token(file, tokens, "bos_token_id");
  const std::string eos = gguf_vocab::named_token(file, tokens, "eos_token_id");
  // llama.cpp adds BOS to a SentencePiece vocabulary that does not say otherwise.
  const bool add_bos = flag(file, "add_bos_token", true) && !bos.empty() && ids.find(bos) >= 0;
  const bool add_eos = flag(file, "add_eos_token", false) && !eos.empty() && ids.find(eos) >= 0;
  auto special = [](const std::string& t, int type_id) { return ordered_json{{"SpecialToken", {{"id", t}, {"type_id", type_id}}}}; };
  auto sequence = [](const char* id, int type_id) { return ordered_json{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
  ordered_json single = ordered_json::array(), pair;
  if (add_bos) single.push_back(special(bos, 0));
  single.push_back(sequence("A", 0));
  if (add_eos) single.push_back(special(eos, 0));
  pair = single;
  if (add_bos) pair.push_back(special(bos, 1));
  pair.push_back(sequence("B", 1));
  if (add_eos) pair.push_back(special(eos, 1));
  ordered_json specials = ordered_json::object();
  for (const auto& [on, t] : {std::pair{add_bos, bos}, std::pair{add_eos, eos}})
    if (on) specials[t] = {{"id", t}, {"ids", {ids.find(t)}}, {"tokens", {t}}};
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

}  // namespace

ordered_json sentencepiece_tokenizer_json(const gguf::File& file, const Vocabulary& vocab) {
  const Flavour f = flavour_of(file.get_string("general.architecture"));
  const std::string pre_key = "tokenizer.ggml.pre";
  if (file.find_metadata(pre_key) && file.get_string(pre_key) != "default")
    throw std::runtime_error(file.path().string() + ": " + pre_key + " '" + file.get_string(pre_key) +
                             "' with a SentencePiece (\"llama\") vocabulary is not supported by ftcore convert "
                             "(llama.cpp writes \"default\")");
  std::vector<std::string> spelled = vocab.tokens;
  if (f.gemma)
    for (std::string& t : spelled) t = gemma_spelling(t);
  const TokenIds ids(spelled);
  ordered_json model = {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", f.gemma ? ordered_json("<unk>") : ordered_json(nullptr)},
                        {"continuing_subword_prefix", nullptr},
                        {"end_of_word_suffix", nullptr},
                        {"fuse_unk", true},
                        {"byte_fallback", true},
                        {"ignore_merges", false},
                        {"vocab", ids.to_json()},
                        {"merges", merges(file, f, spelled, ids)}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added_tokens(file, f, vocab, ids)},
          {"normalizer", normalizer(f)},
          {"pre_tokenizer", pre_tokenizer(f)},
          {"post_processor", post_processor(file, vocab.tokens, ids)},
          {"decoder", decoder(f)},
          {"model", model}};
}

ordered_json sentencepiece_tokenizer_config(const gguf::File& file) {
  const Flavour f = flavour_of(file.get_string("general.architecture"));
  return {{"tokenizer_class", f.tokenizer_class},
          {"clean_up_tokenization_spaces", false},
          {"add_bos_token", flag(file, "add_bos_token", true)},
          {"add_eos_token", flag(file, "add_eos_token", false)}};
}

}  // namespace ftcore

// tokenizer.json's normalizer, pre_tokenizer, decoder and post_processor
// sections -> components, with HF's defaults for absent fields.
#include <stdexcept>

#include "tokenizer_json.h"
#include "utf8.h"

namespace ftcore::tokenizer {

namespace {

template <class Component, class Parse>
std::vector<std::unique_ptr<Component>> parse_list(const JsonFields& node, const char* key, Parse parse) {
  const JsonFields list = node.child(key);
  std::vector<std::unique_ptr<Component>> out;
  for (size_t i = 0; i < list.array_size(); ++i)
    if (auto part = parse(list.element(i))) out.push_back(std::move(part));
  return out;
}

// A field HF declares as a Rust `char`: exactly one character.
std::string single_char(const JsonFields& node, const char* key) {
  const std::string s = node.string(key);
  size_t pos = 0;
  if (!s.empty()) next_code_point(s, pos);
  if (s.empty() || pos != s.size()) node.fail(std::string("'") + key + "' must be one character, got '" + s + "'");
  return s;
}

PrependScheme prepend_scheme(const JsonFields& node) {
  PrependScheme scheme = PrependScheme::Always;
  if (node.has("prepend_scheme")) {
    const std::string s = node.string("prepend_scheme");
    if (s == "first") scheme = PrependScheme::First;
    else if (s == "never") scheme = PrependScheme::Never;
    else if (s != "always") node.fail("prepend_scheme '" + s + "' is not one of first, always, never");
  }
  // The older add_prefix_space=false means "never", and contradicts any other scheme (HF refuses it too).
  if (node.has("add_prefix_space") && !node.boolean("add_prefix_space", true)) {
    if (scheme != PrependScheme::Never) node.fail("add_prefix_space does not match declared prepend_scheme");
  }
  return scheme;
}

SplitBehavior split_behavior(const JsonFields& node) {
  const std::string s = node.string("behavior");
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  node.fail("behavior '" + s + "' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

}  // namespace

std::unique_ptr<Regex> parse_pattern(const JsonFields& node) {
  const bool literal = node.has("String");
  if (!literal && !node.has("Regex")) node.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  const std::string text = node.string(literal ? "String" : "Regex");
  try {
    return std::make_unique<Regex>(text, literal);
  } catch (const std::invalid_argument& e) {
    node.fail(e.what());
  }
}

std::unique_ptr<Normalizer> parse_normalizer(const JsonFields& node) {
  if (node.node().is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "Sequence")
    return std::make_unique<SequenceNormalizer>(parse_list<Normalizer>(node, "normalizers", parse_normalizer));
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(node.string("prepend"));
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(parse_pattern(node.child("pattern")), node.string("content"));
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    try {
      return std::make_unique<UnicodeNormalizer>(type);
    } catch (const std::invalid_argument& e) {
      node.fail(e.what());
    }
  }
  node.unsupported("normalizer", type,
                   unicode_normalization_available() ? "Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD"
                                                     : "Sequence, Prepend, Replace; NFC/NFD/NFKC/NFKD need ICU");
}

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const JsonFields& node) {
  if (node.node().is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "Sequence")
    return std::make_unique<SequencePreTokenizer>(parse_list<PreTokenizer>(node, "pretokenizers", parse_pre_tokenizer));
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPreTokenizer>(node.boolean("add_prefix_space", true), node.boolean("use_regex", true));
  if (type == "Split")
    return std::make_unique<SplitPreTokenizer>(parse_pattern(node.child("pattern")), split_behavior(node),
                                               node.boolean("invert", false));
  if (type == "Digits") return std::make_unique<DigitsPreTokenizer>(node.boolean("individual_digits", false));
  if (type == "Metaspace")
    return std::make_unique<MetaspacePreTokenizer>(single_char(node, "replacement"), prepend_scheme(node),
                                                   node.boolean("split", true));
  node.unsupported("pre_tokenizer", type, "ByteLevel, Split, Digits, Metaspace, Sequence");
}

std::unique_ptr<Decoder> parse_decoder(const JsonFields& node) {
  if (node.node().is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "Sequence")
    return std::make_unique<SequenceDecoder>(parse_list<Decoder>(node, "decoders", parse_decoder));
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const std::string content = single_char(node, "content");
    size_t pos = 0;
    const char32_t cp = next_code_point(content, pos);
    const int64_t start = node.integer("start", 0), stop = node.integer("stop", 0);
    if (start < 0 || stop < 0) node.fail("start and stop must not be negative");
    return std::make_unique<StripDecoder>(cp, static_cast<size_t>(start), static_cast<size_t>(stop));
  }
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(parse_pattern(node.child("pattern")), node.string("content"));
  if (type == "Metaspace")
    return std::make_unique<MetaspaceDecoder>(single_char(node, "replacement"), prepend_scheme(node));
  node.unsupported("decoder", type, "ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, Sequence");
}

std::unique_ptr<PostProcessor> parse_post_processor(const JsonFields& node) {
  if (node.node().is_null()) return nullptr;
  const std::string type = node.type();
  if (type == "Sequence")
    return std::make_unique<SequencePostProcessor>(parse_list<PostProcessor>(node, "processors", parse_post_processor));
  if (type == "ByteLevel") return std::make_unique<IdentityPostProcessor>();
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto id_of = [&](const char* key) {
      const JsonFields pair = node.child(key);
      if (pair.array_size() != 2 || !pair.node().at(1).is_number_integer()) pair.fail("expected [token, id]");
      return pair.node().at(1).get<int32_t>();
    };
    return std::make_unique<TemplatePostProcessor>(std::vector<int32_t>{id_of("cls")}, std::vector<int32_t>{id_of("sep")});
  }
  if (type == "TemplateProcessing") {
    const JsonFields single = node.child("single");
    std::vector<int32_t> before, after;
    bool seen_sequence = false;
    for (size_t i = 0; i < single.array_size(); ++i) {
      const JsonFields piece = single.element(i);
      if (piece.has("Sequence")) {
        const JsonFields seq = piece.child("Sequence");
        if (seq.string("id") != "A") seq.fail("a single-sequence template can only hold sequence A");
        if (seen_sequence) seq.fail("sequence A appears twice");
        seen_sequence = true;
      } else if (piece.has("SpecialToken")) {
        const std::string name = piece.child("SpecialToken").string("id");
        const JsonFields specials = node.child("special_tokens");
        if (!specials.has(name.c_str())) specials.fail("no entry for '" + name + "' used by the template");
        const JsonFields ids = specials.child(name.c_str()).child("ids");
        for (size_t k = 0; k < ids.array_size(); ++k) {
          if (!ids.node().at(k).is_number_integer()) ids.fail("ids must be integers");
          (seen_sequence ? after : before).push_back(ids.node().at(k).get<int32_t>());
        }
      } else {
        piece.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    if (!seen_sequence) single.fail("the template has no sequence A ($A)");
    return std::make_unique<TemplatePostProcessor>(std::move(before), std::move(after));
  }
  node.unsupported("post_processor", type, "TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence");
}

}  // namespace ftcore::tokenizer

// The tokenizer against HF `tokenizers` and transformers, exactly: token ids
// (with and without special tokens), decoding (with and without skipping
// special tokens, also of random id sequences) on a corpus of Debian text and
// generated scripts/emoji/whitespace, for seven tokenizers trained at test
// time (tokenizer_reference.py) and the default model's; GGUF SentencePiece
// vocabularies against transformers' GGUF load; GGUF loading against the
// converted folder; chat templates against apply_chat_template; malformed
// tokenizer.json files refused with the file and the problem.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ftcore/gguf.h"
#include "ftcore/tokenizer.h"
#include "test_support.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace ftcore;

namespace {

const fs::path kDefaultModel = fs::path(FTCORE_SOURCE_DIR) / "third_party/models/SmolLM2-135M-Instruct";
const fs::path kDefaultGguf = fs::path(FTCORE_SOURCE_DIR) / "third_party/models/cache/SmolLM2-135M-Instruct.Q4_1.gguf";

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What HF gives, built once per build tree and reused while the reference
// scripts and the installed tokenizers/transformers versions are unchanged.
struct Reference {
  fs::path dir = fs::path(FTCORE_BUILD_DIR) / "tests" / "tokenizer_reference";
  json manifest;
  std::vector<std::string> samples;

  Reference() {
    const std::string stamp = current_stamp();
    auto valid = [&] { return fs::exists(dir / "manifest.json") && read_text(dir / "stamp") == stamp; };
    if (!valid()) {
      // Built aside and renamed into place, so that test processes running at once never see half of it.
      const std::string unique = std::to_string(std::random_device{}());
      const fs::path fresh = dir.string() + ".new-" + unique, stale = dir.string() + ".old-" + unique;
      fs::create_directories(fresh);
      const std::string args = ftcore::testing::shell_quote(fresh.string()) + " --default-model " +
                               ftcore::testing::shell_quote(kDefaultModel.string());
      std::cout << ftcore::testing::run_python("unit/tokenizer_reference.py", args);
      std::ofstream(fresh / "stamp") << stamp;
      std::error_code ec;
      if (!valid()) {
        fs::rename(dir, stale, ec);
        fs::rename(fresh, dir, ec);
      }
      fs::remove_all(stale, ec);
      fs::remove_all(fresh, ec);
    }
    manifest = read_json(dir / "manifest.json");
    samples = read_json(dir / "corpus.json").at("samples").get<std::vector<std::string>>();
  }

  static std::string current_stamp() {
    const fs::path here = fs::path(FTCORE_SOURCE_DIR) / "tests/unit";
    std::string scripts = read_text(here / "tokenizer_reference.py") + read_text(here / "make_tokenizer_corpus.py") +
                          read_text(here / "chat_template_reference.py") + read_text(here / "sentencepiece_gguf.py");
    std::vector<fs::path> templates;
    for (const auto& entry : fs::directory_iterator(here / "chat_templates")) templates.push_back(entry.path());
    std::sort(templates.begin(), templates.end());
    for (const fs::path& t : templates) scripts += read_text(t);
    const std::string versions = ftcore::testing::run_command(
        ftcore::testing::shell_quote(FTCORE_TEST_PYTHON) +
        " -c \"from importlib.metadata import version as v; print(v('tokenizers'), v('transformers'))\"").output;
    return std::to_string(std::hash<std::string>{}(scripts)) + " " + versions;
  }
};

Reference& reference() {
  static Reference r;
  return r;
}

std::string printable(std::string_view s, size_t limit = 120) {
  std::string out;
  for (unsigned char c : s.substr(0, limit)) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20) out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else out += static_cast<char>(c);
  }
  return "\"" + out + (s.size() > limit ? "...\"" : "\"");
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < 40; ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out + (ids.size() > 40 ? " ...]" : "]");
}

// Compares one tokenizer with HF's expectations; reports the first few differences of each kind.
void expect_same_as_hf(const Tokenizer& tok, const std::string& name) {
  Reference& ref = reference();
  const json expected = read_json(ref.dir / (name + ".expected.json"));
  size_t id_diffs = 0, special_diffs = 0, decode_diffs = 0, skip_diffs = 0, random_diffs = 0, round_trips = 0,
         hf_round_trips = 0, tokens = 0;
  auto report = [](size_t& count, const std::string& what) {
    if (++count <= 5) ADD_FAILURE() << what;
  };
  for (size_t i = 0; i < ref.samples.size(); ++i) {
    const std::string& text = ref.samples[i];
    const auto want = expected["ids"][i].get<std::vector<int32_t>>();
    const auto got = tok.encode(text);
    tokens += got.size();
    if (got != want) report(id_diffs, name + " ids of " + printable(text) + "\n  HF:     " + ids_text(want) + "\n  ftcore: " + ids_text(got));
    const auto want_special = expected["ids_special"][i].get<std::vector<int32_t>>();
    const auto got_special = tok.encode(text, true);
    if (got_special != want_special)
      report(special_diffs, name + " ids with special tokens of " + printable(text) + "\n  HF:     " + ids_text(want_special) +
                                "\n  ftcore: " + ids_text(got_special));
    const std::string decoded = tok.decode(want);
    if (decoded != expected["decoded"][i].get<std::string>())
      report(decode_diffs, name + " decode of " + ids_text(want) + "\n  HF:     " + printable(expected["decoded"][i].get<std::string>()) +
                               "\n  ftcore: " + printable(decoded));
    const std::string decoded_skip = tok.decode(want, true);
    if (decoded_skip != expected["decoded_skip"][i].get<std::string>())
      report(skip_diffs, name + " decode (skipping special tokens) of " + ids_text(want) + "\n  HF:     " +
                             printable(expected["decoded_skip"][i].get<std::string>()) + "\n  ftcore: " + printable(decoded_skip));
    hf_round_trips += expected["decoded"][i].get<std::string>() == text;
    round_trips += expected["decoded"][i].get<std::string>() == text && tok.decode(got) == text;
  }
  for (size_t i = 0; i < expected["random_ids"].size(); ++i) {
    const auto ids = expected["random_ids"][i].get<std::vector<int32_t>>();
    if (tok.decode(ids) != expected["random_decoded"][i].get<std::string>() ||
        tok.decode(ids, true) != expected["random_decoded_skip"][i].get<std::string>())
      report(random_diffs, name + " decode of random ids " + ids_text(ids) + "\n  HF:     " +
                               printable(expected["random_decoded"][i].get<std::string>()) + "\n  ftcore: " + printable(tok.decode(ids)));
  }
  EXPECT_EQ(tok.vocab_size(), expected["vocab_size"].get<int64_t>()) << name;
  for (const auto& special : expected["specials"]) {
    auto id = tok.token_to_id(special.get<std::string>());
    ASSERT_TRUE(id) << name << ": " << special;
    EXPECT_TRUE(tok.is_special(*id)) << name << ": " << special;
  }
  EXPECT_EQ(round_trips, hf_round_trips) << name << ": decode(encode(x)) == x must hold wherever it holds for HF";
  std::cout << name << ": " << ref.samples.size() << " samples, " << tokens << " tokens; differences: ids " << id_diffs
            << ", ids with special tokens " << special_diffs << ", decode " << decode_diffs << ", decode skipping special "
            << skip_diffs << ", random-id decode " << random_diffs << "; round trips " << round_trips << " (HF "
            << hf_round_trips << ")\n";
}

std::string ascii_trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r");
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(" \t\n\r") - b + 1);
}

void write_text(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::string load_error(const fs::path& p) {
  try {
    Tokenizer::from_tokenizer_json(p);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

class TokenizerFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFamily, SameIdsAndDecodingAsHfTokenizers) {
  const std::string name = GetParam();
  auto tok = Tokenizer::from_folder(reference().dir / name);
  expect_same_as_hf(*tok, name);
}

INSTANTIATE_TEST_SUITE_P(Trained, TokenizerFamily,
                         ::testing::Values("gpt2", "llama3", "qwen2", "llama2", "metaspace", "unk", "splits"));

// A GGUF SentencePiece vocabulary, read through ftcore's conversion to
// tokenizer.json, against transformers' own load of the GGUF: each
// architecture's pipeline (llama, gemma3, phi3), the merges derived from
// scores (for Gemma from file order) or listed in the file (llama-merges).
class TokenizerGgufSentencePiece : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGgufSentencePiece, SameIdsAndDecodingAsTransformersGgufLoad) {
  const std::string name = "gguf-" + GetParam();
  auto file = gguf::File::open(reference().dir / name / "tokenizer.gguf");
  auto tok = Tokenizer::from_gguf(*file);
  expect_same_as_hf(*tok, name);
}

INSTANTIATE_TEST_SUITE_P(Architectures, TokenizerGgufSentencePiece, ::testing::Values("llama", "gemma3", "phi3", "llama-merges"));

TEST(TokenizerDefaultModel, SameIdsAndDecodingAsHfTokenizers) {
  if (!fs::exists(kDefaultModel / "tokenizer.json"))
    GTEST_SKIP() << kDefaultModel << " is absent (third_party/setup_defaults.sh makes it)";
  auto tok = Tokenizer::from_folder(kDefaultModel);
  expect_same_as_hf(*tok, "default");
  EXPECT_EQ(tok->bos_id(), tok->token_to_id("<|im_start|>"));
  EXPECT_EQ(tok->eos_id(), tok->token_to_id("<|im_end|>"));
  EXPECT_EQ(tok->pad_id(), tok->token_to_id("<|im_end|>"));
  EXPECT_EQ(ChatTemplate::from_text(tok->chat_template()).name(), "chatml");
}

TEST(TokenizerDefaultModel, GgufGivesTheSameTokenizerAsTheConvertedFolder) {
  if (!fs::exists(kDefaultGguf) || !fs::exists(kDefaultModel / "tokenizer.json"))
    GTEST_SKIP() << kDefaultGguf << " or " << kDefaultModel << " is absent (third_party/setup_defaults.sh makes them)";
  auto file = gguf::File::open(kDefaultGguf);
  auto from_gguf = Tokenizer::from_gguf(*file);
  auto from_folder = Tokenizer::from_folder(kDefaultModel);
  size_t diffs = 0;
  for (const std::string& text : reference().samples) {
    const auto a = from_gguf->encode(text, true), b = from_folder->encode(text, true);
    if (a != b && ++diffs <= 5) ADD_FAILURE() << printable(text) << "\n  GGUF:   " << ids_text(a) << "\n  folder: " << ids_text(b);
  }
  EXPECT_EQ(from_gguf->vocab_size(), from_folder->vocab_size());
  EXPECT_EQ(from_gguf->bos_id(), from_folder->bos_id());
  EXPECT_EQ(from_gguf->eos_id(), from_folder->eos_id());
  EXPECT_EQ(from_gguf->pad_id(), from_folder->pad_id());
  EXPECT_EQ(from_gguf->chat_template(), from_folder->chat_template());
}

TEST(TokenizerChat, RendersAsTransformersApplyChatTemplate) {
  Reference& ref = reference();
  const json cases = read_json(ref.dir / "chat.json");
  ASSERT_GT(cases.size(), 0u);
  for (const auto& c : cases) {
    const std::string name = c["tokenizer"];
    auto tok = Tokenizer::from_folder(name == "default" ? kDefaultModel : ref.dir / name);
    const ChatTemplate by_text = ChatTemplate::from_text(c["template"].get<std::string>());
    EXPECT_EQ(by_text.name(), c["kind"].get<std::string>());
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    const auto segments = by_text.render(messages, c["add_generation_prompt"].get<bool>(), *tok);
    std::string joined, trained;
    for (const auto& s : segments) {
      joined += s.text;
      if (s.trainable) trained += s.text;
    }
    EXPECT_EQ(joined, c["expected"].get<std::string>()) << name << " " << c["kind"] << " " << c["messages"].dump();
    for (const auto& m : messages)  // every assistant reply lies in a trainable segment
      if (m.role == "assistant") EXPECT_NE(trained.find(ascii_trim(m.content)), std::string::npos) << m.content;
    for (const auto& m : messages)  // and nothing else does
      if (m.role != "assistant" && !m.content.empty()) EXPECT_EQ(trained.find(ascii_trim(m.content)), std::string::npos);
  }
}

// Qwen3, SmolLM3, Gemma 2/3, Phi-3/3.5/4/4-mini (chat_template_reference.py):
// the text and token ids of apply_chat_template, its refusals, and what is
// trained: HF's assistant-token mask where the template has {% generation %}
// (SmolLM3), else exactly the replies HF's text holds (header to end token).
TEST(TokenizerChat, FamiliesRenderAsTransformersApplyChatTemplate) {
  Reference& ref = reference();
  const json cases = read_json(ref.dir / "chat_families.json");
  ASSERT_EQ(cases.size(), 220u);  // 8 templates x 11 conversations x prompt or not, x2 with thinking off for 2
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  size_t rendered = 0, refused = 0, split_in_whitespace = 0;
  for (const auto& c : cases) {
    const std::string folder = c["tokenizer"], kind = c["kind"];
    auto& tok = tokenizers[folder];
    if (!tok) tok = Tokenizer::from_folder(ref.dir / folder);
    ChatOptions options;
    options.enable_thinking = c.value("enable_thinking", true);
    options.today = c["today"].get<std::string>();
    const ChatTemplate chat = ChatTemplate::from_text(c["template"].get<std::string>(), options);
    ASSERT_EQ(chat.name(), kind) << c["file"];
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    const bool prompt = c["add_generation_prompt"];
    const std::string where = kind + " " + c["messages"].dump() + (prompt ? " +prompt" : "") +
                              (options.enable_thinking ? "" : " no-thinking");
    if (c.contains("refused")) {
      ++refused;
      try {
        chat.render(messages, prompt, *tok);
        ADD_FAILURE() << where << ": transformers refused it (" << c["refused"] << "), ftcore did not";
      } catch (const TokenizerError& e) {
        EXPECT_NE(std::string(e.what()).find(c["refused"].get<std::string>()), std::string::npos) << where << ": " << e.what();
      }
      continue;
    }
    ++rendered;
    const auto segments = chat.render(messages, prompt, *tok);
    std::string joined;
    std::vector<int32_t> ids;
    std::vector<int> trained_tokens;
    std::vector<std::string> trained_texts;
    for (const auto& s : segments) {
      joined += s.text;
      const auto piece = tok->encode(s.text, /*add_special_tokens=*/false);  // as apply_chat_template(tokenize=True)
      ids.insert(ids.end(), piece.begin(), piece.end());
      trained_tokens.insert(trained_tokens.end(), piece.size(), s.trainable ? 1 : 0);
      if (s.trainable) trained_texts.push_back(s.text);
    }
    EXPECT_EQ(joined, c["expected"].get<std::string>()) << where;
    // The data pipeline tokenizes each segment on its own, so where a reply
    // begins with whitespace right after its header's newline, HF's one
    // pre-token ("\n\n") is two of ours: there only the whole text's ids are
    // compared (a known limit of segment-wise masking, counted below).
    bool whitespace_split = false;
    for (size_t k = 1; k < segments.size(); ++k)
      whitespace_split |= std::isspace(static_cast<unsigned char>(segments[k - 1].text.back())) &&
                          std::isspace(static_cast<unsigned char>(segments[k].text.front()));
    EXPECT_EQ(tok->encode(joined), c["ids"].get<std::vector<int32_t>>()) << where;
    if (whitespace_split) ++split_in_whitespace;
    else EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << where;
    if (c.contains("assistant_mask"))
      EXPECT_EQ(trained_tokens, c["assistant_mask"].get<std::vector<int>>()) << where;
    else
      EXPECT_EQ(trained_texts, c["replies"].get<std::vector<std::string>>()) << where;
    // Recognised by name, the same template renders the same.
    std::string by_name;
    for (const auto& s : ChatTemplate::from_name(kind, options).render(messages, prompt, *tok)) by_name += s.text;
    EXPECT_EQ(by_name, joined) << where;
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(rendered, refused);
  EXPECT_LE(split_in_whitespace, 12u) << "cases with a segment boundary inside a whitespace run";
}

TEST(TokenizerChat, RecognisesTemplatesByNameAndText) {
  for (const char* name : {"chatml", "llama-2", "llama-3", "qwen3", "smollm3", "gemma-2", "gemma-3", "phi-3", "phi-3.5",
                           "phi-4", "phi-4-mini"})
    EXPECT_EQ(ChatTemplate::from_name(name).name(), name);
  try {
    ChatTemplate::from_name("vicuna");
    ADD_FAILURE() << "an unknown name must be refused";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("'vicuna'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("qwen3"), std::string::npos) << e.what();
  }
  const std::string alpaca = "{% for message in messages %}### Instruction:\n{{ message['content'] }}{% endfor %}";
  try {
    ChatTemplate::from_text(alpaca);
    ADD_FAILURE() << "an unknown template must be refused";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("{% for message in messages %}### Instruction"), std::string::npos) << e.what();
  }
}

// A template of a known family that differs from what ftcore writes is
// refused, not rendered as the family's: SmolLM3's with another default
// system prompt, a chatml one with reasoning that is neither Qwen3's nor
// SmolLM3's, a Gemma or Phi variant ftcore does not know.
TEST(TokenizerChat, RefusesVariantsOfKnownFamiliesItDoesNotRender) {
  const fs::path dir = fs::path(FTCORE_SOURCE_DIR) / "tests/unit/chat_templates";
  std::string smollm3 = read_text(dir / "smollm3.jinja");
  const std::string plain = "named SmolLM, trained by Hugging Face.\\n\\n";  // the default prompt without thinking
  const size_t at = smollm3.find(plain);
  ASSERT_NE(at, std::string::npos);
  smollm3.replace(at, plain.size(), "named SmolLM.\\n\\n");
  const std::string thinking_chatml =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.reasoning_content %}<think>{{ m.reasoning_content }}"
      "</think>{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}";
  const std::string gemma1 = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}";
  const std::string phi3_april = "{{ bos_token }}{% for message in messages %}{{'<|user|>' + '\n' + message['content'] + '<|end|>'}}{% endfor %}";
  for (const auto& [text, family] : std::vector<std::pair<std::string, std::string>>{
           {smollm3, "SmolLM3"}, {thinking_chatml, "reasoning"}, {gemma1, "Gemma"}, {phi3_april, "Phi-3"}}) {
    try {
      ChatTemplate::from_text(text);
      ADD_FAILURE() << family << ": a variant must be refused";
    } catch (const TokenizerError& e) {
      EXPECT_NE(std::string(e.what()).find("looks like"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(family), std::string::npos) << e.what();
    }
  }
}

TEST(TokenizerChat, Llama2RefusesRolesThatDoNotAlternate) {
  auto tok = Tokenizer::from_folder(reference().dir / "llama2");
  const ChatTemplate t = ChatTemplate::from_name("llama-2");
  EXPECT_THROW(t.render({{"user", "a"}, {"user", "b"}}, false, *tok), TokenizerError);
}

TEST(TokenizerMalformed, RefusedWithTheFileAndTheProblem) {
  ftcore::testing::TempDir dir;
  const json good = read_json(reference().dir / "gpt2" / "tokenizer.json");
  struct Case {
    std::string name, text, problem;
  };
  auto mutated = [&](auto change) {
    json j = good;
    change(j);
    return j.dump();
  };
  const std::vector<Case> cases = {
      {"bad_json", "{\"model\": {", "not valid JSON"},
      {"not_object", "[1, 2]", "expected a JSON object"},
      {"no_model", mutated([](json& j) { j.erase("model"); }), "no \"model\""},
      {"wordpiece", mutated([](json& j) { j["model"]["type"] = "WordPiece"; }), "model type 'WordPiece' is not supported"},
      {"unigram", mutated([](json& j) { j["model"]["type"] = "Unigram"; }), "model type 'Unigram' is not supported"},
      {"whitespace_pre", mutated([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }),
       "pre_tokenizer type 'Whitespace' is not supported"},
      {"nested_pre", mutated([](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Punctuation"}}}}};
       }), "pre_tokenizer.pretokenizers[0]: pre_tokenizer type 'Punctuation' is not supported"},
      {"lowercase", mutated([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }), "normalizer type 'Lowercase' is not supported"},
      {"bad_regex", mutated([](json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}, {"invert", false}};
       }), "regex '(unclosed' does not compile"},
      {"bad_behavior", mutated([](json& j) {
         j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Sideways"}, {"invert", false}};
       }), "behavior 'Sideways'"},
      {"bad_merge", mutated([](json& j) { j["model"]["merges"].push_back("onlyone"); }), "is not two tokens"},
      {"unknown_merge_token", mutated([](json& j) { j["model"]["merges"].push_back("zzzq qqqz"); }), "is not in the vocabulary"},
      {"dropout", mutated([](json& j) { j["model"]["dropout"] = 0.1; }), "dropout is not supported"},
      {"wordpiece_decoder", mutated([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }), "decoder type 'WordPiece' is not supported"},
      {"version", mutated([](json& j) { j["version"] = "2.0"; }), "version '2.0' is not supported"},
  };
  for (const Case& c : cases) {
    const fs::path p = dir / (c.name + ".json");
    write_text(p, c.text);
    const std::string error = load_error(p);
    EXPECT_NE(error.find(p.string()), std::string::npos) << c.name << ": " << error;
    EXPECT_NE(error.find(c.problem), std::string::npos) << c.name << ": " << error;
  }
  try {
    Tokenizer::from_folder(dir.path());
    ADD_FAILURE() << "a folder without tokenizer.json must be refused";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer.json"), std::string::npos) << e.what();
  }
}

TEST(TokenizerEncode, RefusesInvalidUtf8AndHandlesEmptyText) {
  auto tok = Tokenizer::from_folder(reference().dir / "llama3");
  EXPECT_THROW(tok->encode("ok \xff\xfe"), TokenizerError);
  EXPECT_TRUE(tok->encode("").empty());
  EXPECT_EQ(tok->encode("", true), std::vector<int32_t>{*tok->token_to_id("<|begin_of_text|>")});
  EXPECT_THROW(tok->id_to_token(1 << 30), TokenizerError);
}

TEST(TokenizerEncode, SameIdsFromManyThreadsAtOnce) {
  // Word caches, regex match data and scratch buffers are per thread.
  auto tok = Tokenizer::from_folder(reference().dir / "qwen2");
  const auto& samples = reference().samples;
  std::vector<std::vector<int32_t>> sequential;
  for (const auto& s : samples) sequential.push_back(tok->encode(s));
  std::vector<size_t> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < mismatches.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t i = t; i < samples.size() * 2; i += 3) {
        const size_t k = (i * 7919) % samples.size();
        if (tok->encode(samples[k]) != sequential[k]) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < mismatches.size(); ++t) EXPECT_EQ(mismatches[t], 0u) << "thread " << t;
}

// Pre-tokenizers (HF tokenizers' `pre_tokenizer` section): ByteLevel (GPT-2's
// regex and byte-to-character mapping), Split, Digits, Metaspace (Llama-2's
// "▁") and Sequence. Each splits and rewrites the text pieces (pieces.h) of
// one input, leaving added tokens alone.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "pieces.h"
#include "regex.h"

namespace ftcore::tokenizer {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(Pieces& pieces) const = 0;
};

// GPT-2's byte-to-character table: printable Latin-1 bytes stand for
// themselves, the other 68 bytes for U+0100 onwards, so every byte sequence
// becomes printable text with no spaces (" " is "Ġ").
struct ByteLevelAlphabet {
  std::array<std::string, 256> utf8_of_byte;  // the character standing for each byte, UTF-8
  std::array<int16_t, 512> byte_of_char;      // code point -> byte, -1 when not in the alphabet
};
const ByteLevelAlphabet& byte_level_alphabet();

// GPT-2's pre-tokenization pattern (HF ByteLevel's `use_regex`).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void pre_tokenize(Pieces& pieces) const override;

 private:
  bool add_prefix_space_;
  bool use_regex_;
  std::shared_ptr<const Regex> gpt2_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(Pieces& pieces) const override;

 private:
  std::unique_ptr<Regex> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// Numbers apart from the rest: each digit alone, or runs of digits.
class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual_digits);
  void pre_tokenize(Pieces& pieces) const override;

 private:
  bool individual_digits_;
  std::unique_ptr<Regex> numbers_;
};

enum class PrependScheme { Always, First, Never };

// Spaces become `replacement` ("▁"), one is put before the text (always, or
// only where the input starts), then the text is split before each one.
class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(Pieces& pieces) const override;

 private:
  std::string replacement_;  // one character, UTF-8
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(Pieces& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace ftcore::tokenizer

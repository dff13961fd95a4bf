// Normalizers (HF tokenizers' `normalizer` section): Prepend, Replace,
// Unicode normalization forms (NFC, NFD, NFKC, NFKD through ICU, when ftcore
// was built with it) and Sequence. Each rewrites one piece of text and keeps
// its origin prefix (pieces.h) as HF's alignments would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "regex.h"

namespace ftcore::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text, uint32_t& origin_prefix) const = 0;
};

// Puts `prefix` before non-empty text (Llama-2's "▁").
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text, uint32_t& origin_prefix) const override;

 private:
  std::string prefix_;
};

// Replaces every match of a string or regex pattern by `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text, uint32_t& origin_prefix) const override;

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// NFC, NFD, NFKC or NFKD. Throws std::invalid_argument when ftcore was built
// without ICU.
class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(const std::string& form);
  void normalize(std::string& text, uint32_t& origin_prefix) const override;

 private:
  const void* icu_normalizer_ = nullptr;  // icu::Normalizer2, owned by ICU
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text, uint32_t& origin_prefix) const override {
    for (const auto& step : steps_) step->normalize(text, origin_prefix);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Whether this build can apply Unicode normalization forms (ICU found).
bool unicode_normalization_available();

}  // namespace ftcore::tokenizer

// Decoders (HF tokenizers' `decoder` section): each rewrites the list of
// token strings, and the tokenizer joins what the last one leaves. ByteLevel
// maps stand-in characters back to bytes; ByteFallback turns runs of <0xNN>
// into text; Fuse, Strip, Replace, Metaspace and Sequence as in HF.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pre_tokenizers.h"
#include "regex.h"

namespace ftcore::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

// Removes up to `start` leading and `stop` trailing `content` characters of each token.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// "▁" back to spaces; the first token's are dropped unless prepend_scheme is never.
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, PrependScheme scheme)
      : replacement_(std::move(replacement)), scheme_(scheme) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  std::string replacement_;
  PrependScheme scheme_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace ftcore::tokenizer

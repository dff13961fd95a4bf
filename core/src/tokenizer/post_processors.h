// Post-processors (HF tokenizers' `post_processor` section), for the ids of
// one sequence: TemplateProcessing's `single` template (e.g. "<s> $A"),
// Bert/Roberta wrapping (CLS A SEP), ByteLevel (offsets only: nothing to do
// for ids) and Sequence. Special tokens are added only when asked.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ftcore::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

class IdentityPostProcessor final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

// A template: the ids to put before and after the sequence ($A).
class TemplatePostProcessor final : public PostProcessor {
 public:
  TemplatePostProcessor(std::vector<int32_t> before, std::vector<int32_t> after)
      : before_(std::move(before)), after_(std::move(after)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), before_.begin(), before_.end());
    ids.insert(ids.end(), after_.begin(), after_.end());
  }

 private:
  std::vector<int32_t> before_, after_;
};

class SequencePostProcessor final : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& step : steps_) step->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace ftcore::tokenizer

// Tokenizers: byte-level BPE as HF `tokenizers` defines it, loaded from a
// tokenizer.json (+ tokenizer_config.json) or from GGUF metadata; the GPT-2,
// Llama-3 and Qwen2 pre-tokenizer patterns through PCRE2 (UTF + JIT); BPE
// with byte fallback as in Llama-2's tokenizer.json; added and special
// tokens matched whole in the text; decode. Token ids equal HF tokenizers'.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ftcore {

namespace gguf {
class File;
}

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // An HF folder: tokenizer.json, plus tokenizer_config.json when present
  // (bos/eos/pad tokens, add_bos_token, chat_template).
  static std::unique_ptr<Tokenizer> from_folder(const std::filesystem::path& dir);
  static std::unique_ptr<Tokenizer> from_tokenizer_json(const std::filesystem::path& file);
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

  // Special and added tokens written in `text` map to their ids. With
  // add_special_tokens, the post-processor's tokens (e.g. BOS) are added as
  // HF's `tokenizer(text)` would.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const = 0;

  virtual int64_t vocab_size() const = 0;                    // including added tokens
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;

  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  virtual std::optional<int32_t> pad_id() const = 0;
  // The chat template text from tokenizer_config.json or GGUF ("" when none).
  virtual const std::string& chat_template() const = 0;
};

// Chat templates: the common ones recognised by name (chatml, llama-2,
// llama-3, qwen3, smollm3, gemma-2, gemma-3, phi-3, phi-3.5, phi-4,
// phi-4-mini) or by their Jinja text; anything else is a TokenizerError that
// names the template. Rendering yields segments so the data pipeline can mask
// everything but assistant replies.
struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

struct ChatSegment {
  std::string text;
  bool trainable = false;  // assistant content (and its end-of-turn marker)
};

// The variables some templates read besides the messages.
struct ChatOptions {
  // Qwen3's and SmolLM3's enable_thinking: false writes the empty
  // <think></think> block those models answer with when not reasoning.
  bool enable_thinking = true;
  // SmolLM3's "Today Date" line; empty: the local date now, as its template's
  // strftime_now("%d %B %Y") writes it.
  std::string today;
};

class ChatTemplate {
 public:
  static ChatTemplate from_name(const std::string& name, const ChatOptions& options = {});
  // Recognises a known template from its text (e.g. the one in tokenizer_config.json).
  static ChatTemplate from_text(const std::string& jinja_text, const ChatOptions& options = {});
  const std::string& name() const { return name_; }
  std::vector<ChatSegment> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                  const Tokenizer& tokenizer) const;

 private:
  std::string name_;
  ChatOptions options_;
  // chatml: the system turn the template inserts when the conversation has
  // none (SmolLM2's, Qwen2's); empty when it inserts none.
  std::string default_system_;
};

}  // namespace ftcore

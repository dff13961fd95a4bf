// The renderers behind ChatTemplate (chat_template.cpp recognises which one
// a template is): each writes a conversation as its model's Jinja template
// does under transformers' apply_chat_template, as segments marked trainable
// where the model's own reply is.
#pragma once

#include <string>
#include <vector>

#include "ftcore/tokenizer.h"

namespace ftcore::chat {

// Segments in order, a piece merged into the previous one when both are (not)
// trainable, so the data pipeline tokenizes as few separate pieces as possible.
class SegmentWriter {
 public:
  void add(std::string text, bool trainable);
  std::vector<ChatSegment> take() { return std::move(segments_); }

 private:
  std::vector<ChatSegment> segments_;
};

struct Conversation {
  const std::vector<ChatMessage>& messages;
  bool add_generation_prompt;
  const Tokenizer& tokenizer;
  const ChatOptions& options;
};

// The text of a special token of the tokenizer ("" when it has none, as Jinja renders an unset bos_token).
std::string bos_text(const Tokenizer& tokenizer);
std::string eos_text(const Tokenizer& tokenizer);

// Templates of the <|im_start|>{role}...<|im_end|> kind (chat_render_chatml.cpp).
void render_chatml(const Conversation& c, const std::string& default_system, SegmentWriter& out);
void render_qwen3(const Conversation& c, SegmentWriter& out);
void render_smollm3(const Conversation& c, SegmentWriter& out);
void render_phi4(const Conversation& c, SegmentWriter& out);

// Templates with their own turn markers (chat_render_turns.cpp).
void render_llama2(const Conversation& c, SegmentWriter& out);
void render_llama3(const Conversation& c, SegmentWriter& out);
// Gemma 2 refuses a system message; Gemma 3 writes it at the start of the first user turn.
void render_gemma(const Conversation& c, bool system_in_first_user_turn, SegmentWriter& out);
// Phi-3 (skip_empty_system: Phi-3.5's) and Phi-4-mini (no newline after the role tag).
void render_phi3(const Conversation& c, bool skip_empty_system, SegmentWriter& out);
void render_phi4_mini(const Conversation& c, SegmentWriter& out);

// SmolLM3's system prompts, which its template writes when the conversation
// brings no system message of its own (chat_template.cpp checks a template
// text carries them before calling it SmolLM3's).
extern const char* const kSmolLM3ThinkingSystem;
extern const char* const kSmolLM3PlainSystem;
extern const char* const kSmolLM3KnowledgeCutoff;

}  // namespace ftcore::chat

// Chat templates with their own turn markers:
//   llama-2    <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {reply} </s>
//              (Llama-2-chat's: contents stripped, roles alternate);
//   llama-3    <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//              (Meta-Llama-3-Instruct's: contents trimmed);
//   gemma      <bos><start_of_turn>{user|model}\n{content}<end_of_turn>\n (contents
//              trimmed, roles alternate); Gemma 2 refuses a system message,
//              Gemma 3 writes it and a blank line before the first user turn;
//   phi-3      <|{role}|>\n{content}<|end|>\n, then eos unless prompting
//              (Phi-3.5 drops an empty system message); Phi-4-mini writes
//              <|{role}|>{content}<|end|> without the newlines.
#include "chat_renderers.h"
#include "utf8.h"

namespace ftcore::chat {

namespace {

void require_alternating(const std::string& template_name, const ChatMessage& m, size_t turn) {
  if ((m.role == "user") != (turn % 2 == 0))
    throw TokenizerError(template_name + " chat template: Conversation roles must alternate user/assistant/user/assistant/...");
}

}  // namespace

void render_llama2(const Conversation& c, SegmentWriter& out) {
  const bool has_system = !c.messages.empty() && c.messages[0].role == "system";
  const std::string bos = bos_text(c.tokenizer), eos = eos_text(c.tokenizer);
  for (size_t i = has_system ? 1 : 0, turn = 0; i < c.messages.size(); ++i, ++turn) {
    const ChatMessage& m = c.messages[i];
    require_alternating("llama-2", m, turn);
    std::string content = m.content;
    if (turn == 0 && has_system) content = "<<SYS>>\n" + c.messages[0].content + "\n<</SYS>>\n\n" + content;
    if (m.role == "user") {
      out.add(bos + "[INST] " + tokenizer::python_strip(content) + " [/INST]", false);
    } else if (m.role == "assistant") {
      out.add(" ", false);
      out.add(tokenizer::python_strip(content) + " " + eos, true);
    }
  }
}

void render_llama3(const Conversation& c, SegmentWriter& out) {
  const std::string bos = bos_text(c.tokenizer);
  for (size_t i = 0; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    out.add((i == 0 ? bos : "") + "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", false);
    out.add(tokenizer::python_strip(m.content) + "<|eot_id|>", m.role == "assistant");
  }
  if (c.add_generation_prompt) out.add("<|start_header_id|>assistant<|end_header_id|>\n\n", false);
}

void render_gemma(const Conversation& c, bool system_in_first_user_turn, SegmentWriter& out) {
  const std::string name = system_in_first_user_turn ? "gemma-3" : "gemma-2";
  const bool has_system = !c.messages.empty() && c.messages[0].role == "system";
  if (has_system && !system_in_first_user_turn) throw TokenizerError("gemma-2 chat template: System role not supported");
  const std::string first_user_prefix = has_system ? c.messages[0].content + "\n\n" : "";
  out.add(bos_text(c.tokenizer), false);
  for (size_t i = has_system ? 1 : 0, turn = 0; i < c.messages.size(); ++i, ++turn) {
    const ChatMessage& m = c.messages[i];
    require_alternating(name, m, turn);
    const bool reply = m.role == "assistant";
    out.add("<start_of_turn>" + (reply ? std::string("model") : m.role) + "\n" + (turn == 0 ? first_user_prefix : ""),
            false);
    out.add(tokenizer::python_strip(m.content) + "<end_of_turn>", reply);
    out.add("\n", false);
  }
  if (c.add_generation_prompt) out.add("<start_of_turn>model\n", false);
}

void render_phi3(const Conversation& c, bool skip_empty_system, SegmentWriter& out) {
  for (const ChatMessage& m : c.messages) {
    if (m.role == "system" && skip_empty_system && m.content.empty()) continue;
    out.add("<|" + m.role + "|>\n", false);
    out.add(m.content + "<|end|>", m.role == "assistant");
    out.add("\n", false);
  }
  out.add(c.add_generation_prompt ? "<|assistant|>\n" : eos_text(c.tokenizer), false);
}

void render_phi4_mini(const Conversation& c, SegmentWriter& out) {
  for (const ChatMessage& m : c.messages) {
    out.add("<|" + m.role + "|>", false);
    out.add(m.content + "<|end|>", m.role == "assistant");
  }
  out.add(c.add_generation_prompt ? "<|assistant|>" : eos_text(c.tokenizer), false);
}

}  // namespace ftcore::chat

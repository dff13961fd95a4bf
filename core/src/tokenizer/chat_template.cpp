// Chat templates: which known template a Jinja text is (by markers only that
// template carries, and the literal texts ftcore writes in its place), by
// name, and rendering through chat_renderers.h.
#include <algorithm>
#include <regex>

#include "chat_renderers.h"

namespace ftcore {

namespace {

const std::vector<std::string> kNames = {"chatml",  "llama-2", "llama-3", "qwen3", "smollm3",   "gemma-2",
                                         "gemma-3", "phi-3",   "phi-3.5", "phi-4", "phi-4-mini"};

std::string known_names() {
  std::string list;
  for (const std::string& n : kNames) list += (list.empty() ? "" : ", ") + n;
  return list;
}

// The system turn a chatml template writes when the conversation starts
// without one: '<|im_start|>system\n...<|im_end|>\n' inside a string literal
// (its newline written as a newline or as the escape \n).
std::string chatml_default_system(const std::string& text) {
  static const std::regex literal(R"(<\|im_start\|>system(?:\n|\\n)([^'"]*?)<\|im_end\|>)");
  std::smatch m;
  if (!std::regex_search(text, m, literal)) return "";
  std::string system = m[1].str();
  for (size_t at = system.find("\\n"); at != std::string::npos; at = system.find("\\n", at + 1))
    system.replace(at, 2, "\n");
  return system;
}

// The name of the known template `text` is, or "" when it is none of them;
// a template that looks like a known family but differs from what ftcore
// renders is refused here rather than rendered wrong.
std::string recognise(const std::string& text, const std::string& quoted) {
  auto has = [&](const char* marker) { return text.find(marker) != std::string::npos; };
  auto unlike = [&](const std::string& family, const std::string& what) {
    return TokenizerError("chat template looks like " + family + " but " + what + ", which ftcore does not render: " +
                          quoted);
  };
  if (has("<|im_sep|>")) return "phi-4";
  if (has("<|im_start|>") && has("<|im_end|>")) {
    if (has("Reasoning Mode: ") && has("/no_think")) {
      // The plain prompt is also the start of the thinking one: it must end its string literal (\n\n").
      for (const std::string& literal : {std::string(chat::kSmolLM3ThinkingSystem), std::string(chat::kSmolLM3PlainSystem) + "\\n\\n\"",
                                         std::string(chat::kSmolLM3KnowledgeCutoff)})
        if (!has(literal.c_str())) throw unlike("SmolLM3's", "it lacks '" + literal.substr(0, 60) + "'");
      return "smollm3";
    }
    if (has("enable_thinking") && has("last_query_index") && has("<think>\\n\\n</think>\\n\\n")) return "qwen3";
    if (has("<think>") || has("reasoning_content"))
      throw unlike("a chatml one with reasoning", "it is neither Qwen3's nor SmolLM3's");
    return "chatml";
  }
  if (has("<start_of_turn>") && has("<end_of_turn>")) {
    if (has("first_user_prefix")) return "gemma-3";
    if (has("System role not supported")) return "gemma-2";
    throw unlike("Gemma's", "it is neither Gemma 2's nor Gemma 3's");
  }
  if (has("<|user|>") || has("<|end|>")) {
    if (has("'<|' + message['role'] + '|>'")) return "phi-4-mini";
    // The role tag's newline written as a newline or as the escape \n.
    if ((has("'<|system|>\n'") || has("'<|system|>\\n'")) && (has("'<|assistant|>\n'") || has("'<|assistant|>\\n'")))
      return has("message['role'] == 'system' and message['content']") ? "phi-3.5" : "phi-3";
    throw unlike("Phi-3's", "it is neither Phi-3's, Phi-3.5's nor Phi-4-mini's");
  }
  if (has("<|start_header_id|>") && has("<|eot_id|>")) {
    if (has("Cutting Knowledge Date") || has("tools"))
      throw TokenizerError("chat template looks like Llama 3.1+ (tools and a dated system prompt), which is not "
                           "supported (llama-3 is): " + quoted);
    return "llama-3";
  }
  if (has("[INST]") && has("<<SYS>>")) return "llama-2";
  return "";
}

}  // namespace

ChatTemplate ChatTemplate::from_name(const std::string& name, const ChatOptions& options) {
  if (std::find(kNames.begin(), kNames.end(), name) == kNames.end())
    throw TokenizerError("unknown chat template name '" + name + "' (known: " + known_names() + ")");
  ChatTemplate t;
  t.name_ = name;
  t.options_ = options;
  return t;
}

ChatTemplate ChatTemplate::from_text(const std::string& jinja_text, const ChatOptions& options) {
  if (jinja_text.empty())
    throw TokenizerError("no chat template: the tokenizer has none; name one (" + known_names() + ")");
  const std::string quoted = "'" + jinja_text.substr(0, 120) + (jinja_text.size() > 120 ? "...'" : "'");
  ChatTemplate t;
  t.name_ = recognise(jinja_text, quoted);
  if (t.name_.empty()) throw TokenizerError("chat template not recognised (known: " + known_names() + "): " + quoted);
  if (t.name_ == "chatml") t.default_system_ = chatml_default_system(jinja_text);
  t.options_ = options;
  return t;
}

std::vector<ChatSegment> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                              const Tokenizer& tokenizer) const {
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role != "system" && messages[i].role != "user" && messages[i].role != "assistant")
      throw TokenizerError(name_ + " chat template: message " + std::to_string(i) + " has role '" + messages[i].role +
                           "' (system, user or assistant)");
  const chat::Conversation c{messages, add_generation_prompt, tokenizer, options_};
  chat::SegmentWriter out;
  if (name_ == "chatml") chat::render_chatml(c, default_system_, out);
  else if (name_ == "qwen3") chat::render_qwen3(c, out);
  else if (name_ == "smollm3") chat::render_smollm3(c, out);
  else if (name_ == "phi-4") chat::render_phi4(c, out);
  else if (name_ == "llama-2") chat::render_llama2(c, out);
  else if (name_ == "llama-3") chat::render_llama3(c, out);
  else if (name_ == "gemma-2" || name_ == "gemma-3") chat::render_gemma(c, name_ == "gemma-3", out);
  else if (name_ == "phi-3" || name_ == "phi-3.5") chat::render_phi3(c, name_ == "phi-3.5", out);
  else if (name_ == "phi-4-mini") chat::render_phi4_mini(c, out);
  else throw TokenizerError("chat template '" + name_ + "' cannot render");
  return out.take();
}

namespace chat {

void SegmentWriter::add(std::string text, bool trainable) {
  if (text.empty()) return;
  if (!segments_.empty() && segments_.back().trainable == trainable)
    segments_.back().text += text;
  else
    segments_.push_back({std::move(text), trainable});
}

std::string bos_text(const Tokenizer& tokenizer) {
  const auto id = tokenizer.bos_id();
  return id ? tokenizer.id_to_token(*id) : std::string();
}

std::string eos_text(const Tokenizer& tokenizer) {
  const auto id = tokenizer.eos_id();
  return id ? tokenizer.id_to_token(*id) : std::string();
}

}  // namespace chat

}  // namespace ftcore

// Chat templates: the three common formats, rendered exactly as their Jinja
// templates render under transformers' apply_chat_template, as segments so
// that only assistant replies (and their end-of-turn token) are trained on.
//   chatml   <|im_start|>{role}\n{content}<|im_end|>\n, with the default
//            system turn of SmolLM2's / Qwen2's template when it has one;
//   llama-2  <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {reply} </s>
//            (Llama-2-chat's template: contents stripped, roles alternate);
//   llama-3  <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>
//            (Meta-Llama-3-Instruct's: contents trimmed).
// A template text is recognised by markers only these formats carry.
#include <regex>

#include "ftcore/tokenizer.h"
#include "utf8.h"

namespace ftcore {

namespace {

// Appends a segment, merging it into the previous one when both are (not) trainable,
// so the data pipeline tokenizes as few separate pieces as possible.
void emit(std::vector<ChatSegment>& out, std::string text, bool trainable) {
  if (text.empty()) return;
  if (!out.empty() && out.back().trainable == trainable)
    out.back().text += text;
  else
    out.push_back({std::move(text), trainable});
}

std::string token_text(const Tokenizer& tokenizer, std::optional<int32_t> id) {
  return id ? tokenizer.id_to_token(*id) : std::string();
}

void render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                   const std::string& default_system, std::vector<ChatSegment>& out) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && m.role != "system" && !default_system.empty())
      emit(out, "<|im_start|>system\n" + default_system + "<|im_end|>\n", false);
    const bool reply = m.role == "assistant";
    emit(out, "<|im_start|>" + m.role + "\n", false);
    emit(out, m.content + "<|im_end|>", reply);
    emit(out, "\n", false);
  }
  if (add_generation_prompt) emit(out, "<|im_start|>assistant\n", false);
}

void render_llama2(const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer,
                   std::vector<ChatSegment>& out) {
  const bool has_system = !messages.empty() && messages[0].role == "system";
  const std::string bos = token_text(tokenizer, tokenizer.bos_id());
  const std::string eos = token_text(tokenizer, tokenizer.eos_id());
  for (size_t i = has_system ? 1 : 0, turn = 0; i < messages.size(); ++i, ++turn) {
    const ChatMessage& m = messages[i];
    if ((m.role == "user") != (turn % 2 == 0))
      throw TokenizerError("llama-2 chat template: Conversation roles must alternate user/assistant/user/assistant/...");
    std::string content = m.content;
    if (turn == 0 && has_system) content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    if (m.role == "user") {
      emit(out, bos + "[INST] " + tokenizer::python_strip(content) + " [/INST]", false);
    } else if (m.role == "assistant") {
      emit(out, " ", false);
      emit(out, tokenizer::python_strip(content) + " " + eos, true);
    }
  }
}

void render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Tokenizer& tokenizer,
                   std::vector<ChatSegment>& out) {
  const std::string bos = token_text(tokenizer, tokenizer.bos_id());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    emit(out, (i == 0 ? bos : "") + "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n", false);
    emit(out, tokenizer::python_strip(m.content) + "<|eot_id|>", m.role == "assistant");
  }
  if (add_generation_prompt) emit(out, "<|start_header_id|>assistant<|end_header_id|>\n\n", false);
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

}  // namespace

ChatTemplate ChatTemplate::from_name(const std::string& name) {
  ChatTemplate t;
  if (name == "chatml" || name == "llama-2" || name == "llama-3") {
    t.name_ = name;
    return t;
  }
  throw TokenizerError("unknown chat template name '" + name + "' (known: chatml, llama-2, llama-3)");
}

ChatTemplate ChatTemplate::from_text(const std::string& jinja_text) {
  auto has = [&](const char* marker) { return jinja_text.find(marker) != std::string::npos; };
  const std::string quoted = "'" + jinja_text.substr(0, 120) + (jinja_text.size() > 120 ? "...'" : "'");
  if (jinja_text.empty()) throw TokenizerError("no chat template: the tokenizer has none; name one (chatml, llama-2, llama-3)");
  ChatTemplate t;
  if (has("<|im_start|>") && has("<|im_end|>")) {
    t.name_ = "chatml";
    t.default_system_ = chatml_default_system(jinja_text);
    return t;
  }
  if (has("<|start_header_id|>") && has("<|eot_id|>")) {
    if (has("Cutting Knowledge Date") || has("tools"))
      throw TokenizerError("chat template looks like Llama 3.1+ (tools and a dated system prompt), which is not "
                           "supported (llama-3 is): " + quoted);
    t.name_ = "llama-3";
    return t;
  }
  if (has("[INST]") && has("<<SYS>>")) {
    t.name_ = "llama-2";
    return t;
  }
  throw TokenizerError("chat template not recognised (known: chatml, llama-2, llama-3): " + quoted);
}

std::vector<ChatSegment> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                              const Tokenizer& tokenizer) const {
  std::vector<ChatSegment> out;
  if (name_ == "chatml") render_chatml(messages, add_generation_prompt, default_system_, out);
  else if (name_ == "llama-2") render_llama2(messages, tokenizer, out);
  else if (name_ == "llama-3") render_llama3(messages, add_generation_prompt, tokenizer, out);
  else throw TokenizerError("chat template '" + name_ + "' cannot render");
  return out;
}

}  // namespace ftcore

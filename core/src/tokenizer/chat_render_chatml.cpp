// The <|im_start|>{role}\n...<|im_end|> family of chat templates:
//   chatml   plain, with the default system turn SmolLM2's / Qwen2's template
//            writes when the conversation has none;
//   qwen3    Qwen3's: reasoning written inside <think>...</think> in the reply
//            after the last user message (empty there when the reply has
//            none), dropped from earlier replies; with enable_thinking false
//            the generation prompt carries the empty block;
//   smollm3  SmolLM3's: a metadata system turn (knowledge cutoff, today's
//            date, reasoning mode) with the custom instructions or a default
//            prompt; /think and /no_think in the system message override
//            enable_thinking; replies trained whole, header included, as its
//            {% generation %} block marks them;
//   phi-4    Phi-4's <|im_start|>{role}<|im_sep|>{content}<|im_end|>, no newlines.
#include <ctime>

#include "chat_renderers.h"
#include "utf8.h"

namespace ftcore::chat {

const char* const kSmolLM3ThinkingSystem =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
    "accurate solution. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
    "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
    "structure your response into two main sections: Thought and Solution using the specified format: <think> "
    "Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. Each "
    "step should include detailed considerations such as analysing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The Solution section should "
    "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.";
const char* const kSmolLM3PlainSystem = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";
const char* const kSmolLM3KnowledgeCutoff = "Knowledge Cutoff Date: June 2025";

namespace {

// Python's str.lstrip / rstrip / strip with one character to remove.
std::string lstrip_char(const std::string& s, char c) {
  const size_t b = s.find_first_not_of(c);
  return b == std::string::npos ? "" : s.substr(b);
}
std::string rstrip_char(const std::string& s, char c) {
  const size_t e = s.find_last_not_of(c);
  return e == std::string::npos ? "" : s.substr(0, e + 1);
}
std::string strip_char(const std::string& s, char c) { return lstrip_char(rstrip_char(s, c), c); }

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Qwen3's index of the last user message that is not a tool response (the
// template's ns.last_query_index: replies after it keep their reasoning).
size_t qwen3_last_query(const std::vector<ChatMessage>& messages) {
  for (size_t k = messages.size(); k-- > 0;) {
    const ChatMessage& m = messages[k];
    if (m.role == "user" && !(starts_with(m.content, "<tool_response>") && ends_with(m.content, "</tool_response>")))
      return k;
  }
  return messages.size() - 1;
}

// strftime_now("%d %B %Y") of SmolLM3's template: the local date, English month names.
std::string today_as_smollm3_writes_it() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[64];
  std::strftime(text, sizeof text, "%d %B %Y", &local);
  return text;
}

}  // namespace

void render_chatml(const Conversation& c, const std::string& default_system, SegmentWriter& out) {
  for (size_t i = 0; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    if (i == 0 && m.role != "system" && !default_system.empty())
      out.add("<|im_start|>system\n" + default_system + "<|im_end|>\n", false);
    out.add("<|im_start|>" + m.role + "\n", false);
    out.add(m.content + "<|im_end|>", m.role == "assistant");
    out.add("\n", false);
  }
  if (c.add_generation_prompt) out.add("<|im_start|>assistant\n", false);
}

void render_qwen3(const Conversation& c, SegmentWriter& out) {
  if (c.messages.empty()) return;
  const size_t last_query = qwen3_last_query(c.messages);
  for (size_t i = 0; i < c.messages.size(); ++i) {
    const ChatMessage& m = c.messages[i];
    if (m.role != "assistant") {
      out.add("<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n", false);
      continue;
    }
    // Reasoning written in the content: what lies between <think> and the first </think>.
    std::string content = m.content, reasoning;
    if (const size_t close = content.find("</think>"); close != std::string::npos) {
      const std::string before = rstrip_char(content.substr(0, close), '\n');
      const size_t open = before.rfind("<think>");
      reasoning = lstrip_char(open == std::string::npos ? before : before.substr(open + 7), '\n');
      content = lstrip_char(content.substr(content.rfind("</think>") + 8), '\n');
    }
    const bool is_last = i + 1 == c.messages.size();
    out.add("<|im_start|>assistant\n", false);
    if (i > last_query && (is_last || !reasoning.empty()))
      out.add("<think>\n" + strip_char(reasoning, '\n') + "\n</think>\n\n" + lstrip_char(content, '\n'), true);
    else
      out.add(content, true);
    out.add("<|im_end|>", true);
    out.add("\n", false);
  }
  if (c.add_generation_prompt)
    out.add(c.options.enable_thinking ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n", false);
}

void render_smollm3(const Conversation& c, SegmentWriter& out) {
  bool thinking = c.options.enable_thinking;
  std::string system = "<|im_start|>system\n";
  const bool has_system = !c.messages.empty() && c.messages[0].role == "system";
  std::string custom;
  if (has_system) {
    const std::string& given = c.messages[0].content;
    if (contains(given, "/no_think")) thinking = false;
    else if (contains(given, "/think")) thinking = true;
    custom = tokenizer::python_rstrip(replace_all(replace_all(given, "/no_think", ""), "/think", ""));
  }
  if (has_system && contains(c.messages[0].content, "/system_override")) {
    system += tokenizer::python_rstrip(replace_all(custom, "/system_override", "")) + "<|im_end|>\n";
  } else {
    system += std::string("## Metadata\n\n") + kSmolLM3KnowledgeCutoff + "\nToday Date: " +
              (c.options.today.empty() ? today_as_smollm3_writes_it() : c.options.today) +
              "\nReasoning Mode: " + (thinking ? "/think" : "/no_think") + "\n\n## Custom Instructions\n\n" +
              (!custom.empty() ? custom : thinking ? kSmolLM3ThinkingSystem : kSmolLM3PlainSystem) + "\n\n<|im_end|>\n";
  }
  out.add(system, false);
  const std::string empty_thought = thinking ? "" : "<think>\n\n</think>\n";
  for (const ChatMessage& m : c.messages) {  // system messages are the header's alone
    if (m.role == "user") out.add("<|im_start|>user\n" + m.content + "<|im_end|>\n", false);
    if (m.role == "assistant")
      out.add("<|im_start|>assistant\n" + empty_thought + lstrip_char(m.content, '\n') + "<|im_end|>\n", true);
  }
  if (c.add_generation_prompt) out.add("<|im_start|>assistant\n" + empty_thought, false);
}

void render_phi4(const Conversation& c, SegmentWriter& out) {
  for (const ChatMessage& m : c.messages) {
    out.add("<|im_start|>" + m.role + "<|im_sep|>", false);
    out.add(m.content + "<|im_end|>", m.role == "assistant");
  }
  if (c.add_generation_prompt) out.add("<|im_start|>assistant<|im_sep|>", false);
}

}  // namespace ftcore::chat

// The dataset formats' prompts (see prompt_formats.h).
#include "prompt_formats.h"

namespace ftcore::data {

namespace {

constexpr const char* kAlpacaWithInput =
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n";
constexpr const char* kAlpacaNoInput =
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n";

std::string required_string(const nlohmann::json& row, const std::string& field) {
  if (!row.is_object()) throw DataError("the row is not a JSON object");
  auto it = row.find(field);
  if (it == row.end()) throw DataError("missing field '" + field + "'");
  if (!it->is_string()) throw DataError("field '" + field + "' is not a string");
  return it->get<std::string>();
}

std::string optional_string(const nlohmann::json& row, const std::string& field) {
  auto it = row.find(field);
  if (it == row.end() || it->is_null()) return "";
  if (!it->is_string()) throw DataError("field '" + field + "' is not a string");
  return it->get<std::string>();
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
}

std::string fill(std::string prompt, const std::string& instruction, const std::string& input) {
  replace_all(prompt, "{instruction}", instruction);
  replace_all(prompt, "{input}", input);
  return prompt;
}

std::string map_role(const std::string& role) {
  if (role == "human" || role == "user") return "user";
  if (role == "gpt" || role == "assistant" || role == "model") return "assistant";
  if (role == "system") return "system";
  throw DataError("unknown chat role '" + role + "' (use system, user/human, assistant/gpt)");
}

std::vector<ChatMessage> read_messages(const nlohmann::json& row) {
  if (!row.is_object()) throw DataError("the row is not a JSON object");
  const bool sharegpt = !row.contains("messages") && row.contains("conversations");
  const std::string list_field = sharegpt ? "conversations" : "messages";
  auto it = row.find(list_field);
  if (it == row.end()) throw DataError("missing field 'messages' (or sharegpt 'conversations')");
  if (!it->is_array() || it->empty()) throw DataError("field '" + list_field + "' must be a non-empty array");
  std::vector<ChatMessage> messages;
  size_t index = 0;
  for (const auto& m : *it) {
    const std::string where = list_field + "[" + std::to_string(index++) + "].";
    const std::string role_key = sharegpt ? "from" : "role", content_key = sharegpt ? "value" : "content";
    if (!m.is_object() || !m.contains(role_key) || !m[role_key].is_string())
      throw DataError("missing field '" + where + role_key + "'");
    if (!m.contains(content_key) || !m[content_key].is_string())
      throw DataError("missing field '" + where + content_key + "'");
    messages.push_back({map_role(m[role_key].get<std::string>()), m[content_key].get<std::string>()});
  }
  return messages;
}

}  // namespace

std::vector<ChatSegment> render_row(const nlohmann::json& row, const DataConfig& config,
                                    const ChatTemplate* chat_template, const Tokenizer& tokenizer) {
  if (config.format == "completion") return {{required_string(row, config.field), true}};
  if (config.format == "alpaca" || config.format == "template") {
    const std::string instruction = required_string(row, "instruction");
    const std::string input = optional_string(row, "input");
    const std::string output = required_string(row, "output");
    std::string prompt;
    if (config.format == "template") prompt = fill(config.prompt_template, instruction, input);
    else prompt = fill(input.empty() ? kAlpacaNoInput : kAlpacaWithInput, instruction, input);
    return {{prompt, false}, {output, true}};
  }
  if (config.format == "chat") {
    if (!chat_template) throw DataError("the chat format needs a chat template");
    return chat_template->render(read_messages(row), false, tokenizer);
  }
  throw DataError("unknown dataset format '" + config.format + "'");
}

}  // namespace ftcore::data

// Tokenizer::from_folder / from_tokenizer_json / from_gguf: read the JSON
// (GGUF metadata goes through the same tokenizer.json that `ftcore convert`
// writes, so both paths build one tokenizer), then the special tokens and
// chat template of tokenizer_config.json (chat_template.jinja wins, as in
// transformers).
#include <fstream>
#include <sstream>

#include "bpe_tokenizer.h"
#include "ftcore/gguf.h"
#include "ftcore/tokenizer.h"
#include "gguf_tokenizer_json.h"

namespace ftcore {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(path.string() + ": cannot be opened");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

nlohmann::json read_json(const fs::path& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw TokenizerError(path.string() + ": not valid JSON: " + e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw TokenizerError(path.string() + ": not readable JSON: " + e.what());
  }
}

// A special token in tokenizer_config.json: a string, or an AddedToken object with "content".
std::optional<std::string> config_token(const nlohmann::json& config, const char* key, const std::string& source) {
  if (!config.contains(key) || config.at(key).is_null()) return std::nullopt;
  const auto& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string()) return v.at("content").get<std::string>();
  throw TokenizerError(source + ": '" + key + "' must be a token string or an object with \"content\"");
}

std::string config_chat_template(const nlohmann::json& config, const std::string& source) {
  if (!config.contains("chat_template") || config.at("chat_template").is_null()) return "";
  const auto& t = config.at("chat_template");
  if (t.is_string()) return t.get<std::string>();
  // Several named templates: the one called "default".
  if (t.is_array())
    for (const auto& named : t)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template"))
        return named.at("template").get<std::string>();
  throw TokenizerError(source + ": 'chat_template' must be a string or a list holding a \"default\" template");
}

tokenizer::TokenizerConfig parse_config(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) throw TokenizerError(source + ": expected a JSON object");
  tokenizer::TokenizerConfig out;
  out.bos_token = config_token(config, "bos_token", source);
  out.eos_token = config_token(config, "eos_token", source);
  out.pad_token = config_token(config, "pad_token", source);
  out.chat_template = config_chat_template(config, source);
  return out;
}

std::unique_ptr<Tokenizer> build(const nlohmann::json& tokenizer_json, const tokenizer::TokenizerConfig& config,
                                 const std::string& source) {
  return std::make_unique<tokenizer::BpeTokenizer>(tokenizer::parse_tokenizer_json(tokenizer_json, source), config,
                                                   source);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_tokenizer_json(const fs::path& file) {
  return build(read_json(file), {}, file.string());
}

std::unique_ptr<Tokenizer> Tokenizer::from_folder(const fs::path& dir) {
  const fs::path file = dir / "tokenizer.json";
  if (!fs::exists(file)) throw TokenizerError(dir.string() + ": no tokenizer.json in this folder");
  tokenizer::TokenizerConfig config;
  const fs::path config_file = dir / "tokenizer_config.json";
  if (fs::exists(config_file)) config = parse_config(read_json(config_file), config_file.string());
  const fs::path jinja = dir / "chat_template.jinja";
  if (fs::exists(jinja)) config.chat_template = read_file(jinja);
  return build(read_json(file), config, file.string());
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  const std::string source = file.path().string() + " (GGUF tokenizer metadata)";
  nlohmann::json tokenizer_json, config_json;
  try {
    // ordered_json (as the converter writes it) -> json: through its text.
    tokenizer_json = nlohmann::json::parse(gguf_tokenizer_json(file).dump());
    config_json = nlohmann::json::parse(gguf_tokenizer_config_json(file).dump());
  } catch (const TokenizerError&) {
    throw;
  } catch (const std::exception& e) {
    throw TokenizerError(source + ": " + e.what());
  }
  return build(tokenizer_json, parse_config(config_json, source), source);
}

}  // namespace ftcore

// `ftcore generate --model DIR (--prompt TEXT | --chat TEXT) [options]`:
// text from an HF model folder, printed token by token as it is generated
// (greedy by default, or as generation_config.json says; sampling with
// --temperature > 0, --top-k, --top-p, --seed). --chat renders the message
// with the tokenizer's chat template and asks for the assistant's reply.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>

#include <boost/program_options.hpp>
#include <spdlog/spdlog.h>

#include "command_line.h"
#include "commands.h"
#include "ftcore/plugin_loader.h"
#include "peft_adapter.h"
#include "ftcore/model.h"
#include "ftcore/quantized_model.h"
#include "ftcore/model_generation.h"
#include "ftcore/tokenizer.h"

namespace po = boost::program_options;

namespace ftcore::cli {

namespace {

// Prints the text of the tokens so far as it grows. Decoding the whole
// prefix each time keeps multi-byte characters split across tokens intact:
// nothing is printed while the text ends in an incomplete character.
class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  void add(int64_t token) {
    ids_.push_back(static_cast<int32_t>(token));
    const std::string text = tokenizer_.decode(ids_, /*skip_special_tokens=*/true);
    static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD: bytes of an unfinished character
    if (text.size() >= kReplacement.size() && text.compare(text.size() - 3, 3, kReplacement) == 0) return;
    if (text.size() > printed_) {
      std::cout << text.substr(printed_) << std::flush;
      printed_ = text.size();
    }
  }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  size_t printed_ = 0;
};

std::vector<int64_t> encode_request(const Tokenizer& tokenizer, const std::optional<std::string>& prompt,
                                    const std::optional<std::string>& chat, const std::optional<std::string>& system) {
  std::vector<int32_t> ids;
  if (prompt) {
    ids = tokenizer.encode(*prompt, /*add_special_tokens=*/true);  // as HF's tokenizer(text)
  } else {
    if (tokenizer.chat_template().empty())
      throw std::runtime_error("--chat: the tokenizer has no chat template (tokenizer_config.json); use --prompt");
    ChatTemplate chat_template = ChatTemplate::from_text(tokenizer.chat_template());
    std::vector<ChatMessage> messages;
    if (system) messages.push_back({"system", *system});
    messages.push_back({"user", *chat});
    std::string text;
    for (const ChatSegment& s : chat_template.render(messages, /*add_generation_prompt=*/true, tokenizer)) text += s.text;
    ids = tokenizer.encode(text, /*add_special_tokens=*/false);  // the template wrote the special tokens
  }
  if (ids.empty()) throw po::error("the prompt encodes to no tokens");
  return {ids.begin(), ids.end()};
}

// Past max_position_embeddings the model was never trained and the RoPE
// tables end; a prompt or a --max-new-tokens that goes there is refused.
void check_prompt_fits(const std::vector<int64_t>& ids, const ModelConfig& config,
                       const std::optional<int64_t>& max_new_tokens) {
  const int64_t positions = config.max_position_embeddings, prompt = static_cast<int64_t>(ids.size());
  if (positions <= 0) return;
  if (prompt >= positions)
    throw po::error("the prompt is " + std::to_string(prompt) + " tokens; the model holds " + std::to_string(positions) +
                    " positions (max_position_embeddings), leaving no room to generate");
  if (max_new_tokens && *max_new_tokens > positions - prompt)
    throw po::error("--max-new-tokens " + std::to_string(*max_new_tokens) + " after a " + std::to_string(prompt) +
                    "-token prompt runs past the model's " + std::to_string(positions) +
                    " positions (max_position_embeddings); at most " + std::to_string(positions - prompt));
}

}  // namespace

int generate_command(const std::vector<std::string>& args) {
  po::options_description visible(
      "Usage: ftcore generate --model DIR (--prompt TEXT | --chat TEXT) [options]\n\n"
      "Generates text with an HF model folder, printing tokens as they come. Greedy unless\n"
      "--temperature > 0 (or generation_config.json samples); top-k/top-p default to\n"
      "generation_config.json's (transformers' defaults 50 and 1.0 when absent).\n\nOptions");
  std::string model_dir, dtype_text = "auto", device_text = "cpu";
  std::optional<std::string> adapter, prompt, chat, system;
  std::optional<int64_t> max_new_tokens, top_k;
  std::optional<double> temperature, top_p;
  uint64_t seed = 0;
  visible.add_options()("help,h", "show this help")("model", po::value(&model_dir)->required(), "HF model folder")(
      "adapter", po::value<std::string>(), "adapter folder (PEFT format)")(
      "prompt", po::value<std::string>(), "text to continue")(
      "chat", po::value<std::string>(), "a user message, rendered with the chat template")(
      "system", po::value<std::string>(), "a system message for --chat")(
      "max-new-tokens", po::value<int64_t>(), "tokens to generate at most (default: generation_config or 128)")(
      "temperature", po::value<double>(), "0 = greedy; > 0 samples from softmax(logits / T)")(
      "top-k", po::value<int64_t>(), "sample among the k most likely tokens (0 = off)")(
      "top-p", po::value<double>(), "sample from the smallest set with probability >= p (1 = off)")(
      "seed", po::value(&seed), "sampling seed (default 0)")(
      "dtype", po::value(&dtype_text), "auto (the checkpoint's), fp32, bf16 or fp16")(
      "device", po::value(&device_text), "cpu (default) or cuda");
  po::variables_map vm;
  if (!parse_options(args, visible, vm)) return kExitOk;
  auto take = [&](const char* key, auto& out) {
    if (vm.count(key)) out = vm[key].as<typename std::decay_t<decltype(out)>::value_type>();
  };
  take("adapter", adapter);
  take("prompt", prompt);
  take("chat", chat);
  take("system", system);
  take("max-new-tokens", max_new_tokens);
  take("temperature", temperature);
  take("top-k", top_k);
  take("top-p", top_p);
  if (adapter && !std::filesystem::exists(std::filesystem::path(*adapter) / "adapter_config.json"))
    throw po::error("--adapter " + *adapter + ": not a PEFT adapter folder (no adapter_config.json)");
  if (prompt.has_value() == chat.has_value()) throw po::error("give exactly one of --prompt and --chat");
  if (system && !chat) throw po::error("--system goes with --chat");
  if (device_text != "cpu" && device_text != "cuda") throw po::error("--device must be cpu or cuda, got '" + device_text + "'");

  LoadOptions load;
  if (dtype_text != "auto") {
    try {
      load.dtype = parse_dtype_name(dtype_text);
    } catch (const ModelError& e) {
      throw po::error(std::string("--dtype: ") + e.what());
    }
  }
  load.device = device_text == "cuda" ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  // A folder that is not a supported model fails here, before the tokenizer.
  const ModelConfig config = read_model_config(model_dir);
  auto tokenizer = Tokenizer::from_folder(model_dir);
  const std::vector<int64_t> ids = encode_request(*tokenizer, prompt, chat, system);
  check_prompt_fits(ids, config, max_new_tokens);
  // Declared before the model so they outlive it: the adapter's modules in
  // the model run code of the plugin library these keep loaded.
  PluginRegistry registry;
  std::shared_ptr<sdk::Adapter> applied;
  std::shared_ptr<Model> model;
  if (adapter || is_quantized_folder(model_dir)) load_plugins(PluginSearchOptions{}, registry);
  if (is_quantized_folder(model_dir)) {
    QuantizedModel quantized = load_quantized_model(model_dir, load, registry);
    spdlog::info("quantized model ({})", quantized.quantizer_name);
    model = quantized.model;
  } else {
    model = Model::from_pretrained(model_dir, load);
  }
  if (adapter) {
    applied = apply_peft_adapter(*adapter, *model, registry);
    spdlog::info("adapter {} applied", *adapter);
  }
  const GenerationConfig defaults = read_generation_config(model_dir, model->config());

  SamplingOptions options;
  options.temperature = temperature.value_or(defaults.do_sample ? defaults.temperature : 0.0);
  if (options.greedy() && (top_k || top_p))
    throw po::error("--top-k and --top-p apply to sampling; give --temperature > 0");
  options.top_k = top_k.value_or(defaults.top_k);
  options.top_p = top_p.value_or(defaults.top_p);
  options.seed = seed;
  options.max_new_tokens = max_new_tokens.value_or(defaults.max_new_tokens.value_or(128));
  const int64_t room = config.max_position_embeddings - static_cast<int64_t>(ids.size());
  if (!max_new_tokens && options.max_new_tokens > room) {
    spdlog::info("generating at most {} tokens: the model holds {} positions", room, config.max_position_embeddings);
    options.max_new_tokens = room;
  }
  options.stop_token_ids = defaults.eos_token_ids;
  try {
    validate_sampling_options(options);
  } catch (const std::invalid_argument& e) {
    throw po::error(e.what());
  }

  TextStream stream(*tokenizer);
  const auto start = std::chrono::steady_clock::now();
  GenerationResult result = generate(*model, ids, options, [&](int64_t token) {
    stream.add(token);
    return true;
  });
  std::cout << "\n" << std::flush;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("{} prompt tokens, {} new tokens in {:.2f} s ({:.1f} tokens/s), {}", ids.size(), result.tokens.size(),
               seconds, result.tokens.size() / seconds,
               result.reason == StopReason::StopToken ? "stopped at an end token" : "reached --max-new-tokens");
  return kExitOk;
}

}  // namespace ftcore::cli

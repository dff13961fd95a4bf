// PCRE2 behind the tokenizer's Regex: compile (after rewriting the escapes
// whose meaning differs from Oniguruma's), JIT, and search from an offset.
#include "regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "utf8.h"

namespace ftcore::tokenizer {

namespace {

// What Oniguruma (UTF-8, Unicode classes) means by these escapes.
constexpr const char* kWordClassBody = R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control})";

// Per-thread match state: one ovector pair (only the whole match is read)
// and a JIT stack large enough for long whitespace runs under `\s+(?!\S)`.
struct ThreadMatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  ThreadMatchState() { pcre2_jit_stack_assign(context, nullptr, jit_stack); }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string oniguruma_to_pcre2(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        out += R"(\p{White_Space})";
      } else if (e == 'S') {
        out += R"(\P{White_Space})";
      } else if (e == 'w') {
        out += in_class ? std::string(kWordClassBody) : "[" + std::string(kWordClassBody) + "]";
      } else if (e == 'W' && !in_class) {
        out += "[^" + std::string(kWordClassBody) + "]";
      } else if (e == 'h') {
        out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
      } else if (e == 'H' && !in_class) {
        out += "[^0-9a-fA-F]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t close = pattern.find(":]", i + 2);
      if (close != std::string::npos) {
        out.append(pattern, i, close + 2 - i);
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern, bool literal) : pattern_(pattern) {
  const std::string source = literal ? pattern : oniguruma_to_pcre2(pattern);
  // Oniguruma's ^ and $ are line anchors, hence MULTILINE (PCRE2_LITERAL allows no UCP).
  const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(), options, &error,
                                   &error_offset, nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw std::invalid_argument("regex '" + pattern + "' does not compile (PCRE2, at offset " +
                                std::to_string(error_offset) + "): " + reinterpret_cast<const char*>(message));
  }
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

size_t Regex::char_length_at(std::string_view text, size_t pos) {
  return utf8_length(static_cast<unsigned char>(text[pos]));
}

bool Regex::search(std::string_view text, size_t start, size_t& begin, size_t& end) const {
  ThreadMatchState& state = thread_state();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, 0, state.data, state.context)
                      : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data, state.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    throw std::runtime_error("regex '" + pattern_ + "' failed on a " + std::to_string(text.size()) +
                             "-byte text: " + reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
  begin = ovector[0];
  end = ovector[1];
  return true;
}

bool Regex::matches_at(std::string_view text, size_t pos) const {
  ThreadMatchState& state = thread_state();
  const int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(text.data()),
                             text.size(), pos, PCRE2_ANCHORED | PCRE2_NO_UTF_CHECK, state.data, state.context);
  return rc >= 0;
}

void Regex::find_matches(std::string_view text, std::vector<MatchSpan>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  uint32_t previous = 0;
  for_each_match(text, [&](size_t begin, size_t end) {
    if (previous != begin) out.push_back({previous, static_cast<uint32_t>(begin), false});
    out.push_back({static_cast<uint32_t>(begin), static_cast<uint32_t>(end), true});
    previous = static_cast<uint32_t>(end);
  });
  if (previous != text.size()) out.push_back({previous, static_cast<uint32_t>(text.size()), false});
}

}  // namespace ftcore::tokenizer

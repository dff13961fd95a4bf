// Normalizer bodies. Replace follows NormalizedString::replace: the inserted
// text takes the alignment of the last byte it replaces, which is what
// decides whether it still sits at offset 0 of the input.
#include "normalizers.h"

#include <stdexcept>

#ifdef FTCORE_TOKENIZER_WITH_ICU
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#endif

#include "utf8.h"

namespace ftcore::tokenizer {

void PrependNormalizer::normalize(std::string& text, uint32_t& origin_prefix) const {
  if (text.empty()) return;
  text.insert(0, prefix_);
  if (origin_prefix > 0) origin_prefix += static_cast<uint32_t>(prefix_.size());
}

void ReplaceNormalizer::normalize(std::string& text, uint32_t& origin_prefix) const {
  thread_local std::vector<MatchSpan> matches;
  pattern_->find_matches(text, matches);
  bool any = false;
  for (const MatchSpan& m : matches) any |= m.is_match;
  if (!any) return;
  std::string out;
  out.reserve(text.size() + content_.size());
  uint32_t prefix = 0;
  bool in_prefix = true;  // every byte written so far is aligned to offset 0
  const uint32_t old_prefix = origin_prefix;
  for (const MatchSpan& m : matches) {
    if (!m.is_match) {
      out.append(text, m.begin, m.end - m.begin);
      if (in_prefix && m.begin < old_prefix) prefix += std::min(m.end, old_prefix) - m.begin;
      if (m.end > old_prefix) in_prefix = false;
      continue;
    }
    out += content_;
    const bool aligned_to_origin = m.end == 0 ? old_prefix > 0 : m.end - 1 < old_prefix;
    if (in_prefix && aligned_to_origin)
      prefix += static_cast<uint32_t>(content_.size());
    else if (!content_.empty())
      in_prefix = false;
  }
  text.swap(out);
  origin_prefix = prefix;
}

#ifdef FTCORE_TOKENIZER_WITH_ICU

bool unicode_normalization_available() { return true; }

UnicodeNormalizer::UnicodeNormalizer(const std::string& form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (form == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  else if (form == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  else if (form == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  else if (form == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  else throw std::invalid_argument("unknown Unicode normalization form '" + form + "'");
  if (U_FAILURE(status) || !n)
    throw std::invalid_argument(std::string("ICU cannot give the ") + form + " normalizer: " + u_errorName(status));
  icu_normalizer_ = n;
}

void UnicodeNormalizer::normalize(std::string& text, uint32_t& origin_prefix) const {
  const auto* n = static_cast<const icu::Normalizer2*>(icu_normalizer_);
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece input(text.data(), static_cast<int32_t>(text.size()));
  if (n->isNormalizedUTF8(input, status) && U_SUCCESS(status)) return;
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  n->normalizeUTF8(0, input, sink, nullptr, status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("ICU normalization failed: ") + u_errorName(status));
  text.swap(out);
  // The composed or decomposed first character keeps the first input
  // character's alignment; what lies past it is approximated as not at offset 0.
  if (origin_prefix > 0 && !text.empty())
    origin_prefix = static_cast<uint32_t>(utf8_length(static_cast<unsigned char>(text[0])));
  else
    origin_prefix = 0;
}

#else

bool unicode_normalization_available() { return false; }

UnicodeNormalizer::UnicodeNormalizer(const std::string& form) {
  throw std::invalid_argument("normalizer " + form + " needs ICU, and this ftcore was built without it (install libicu-dev and rebuild)");
}

void UnicodeNormalizer::normalize(std::string&, uint32_t&) const {}

#endif

}  // namespace ftcore::tokenizer

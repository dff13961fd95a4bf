// Dataset rows -> text segments, each marked trainable (its tokens carry
// labels) or not (prompt; masked unless train_on_inputs). Formats:
//   alpaca      instruction, input (optional), output — Stanford Alpaca's
//               prompt, as Axolotl's `alpaca` type writes it
//   completion  one text field, all trainable
//   template    a custom prompt with {instruction} and {input}, then output
//   chat        messages [{role, content}] or sharegpt conversations
//               [{from, value}] (human/gpt mapped to user/assistant),
//               rendered by the chat template; assistant turns trainable
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ftcore/dataset.h"
#include "ftcore/tokenizer.h"

namespace ftcore::data {

// Throws DataError("<field>: ...") naming the missing or mistyped field;
// the caller adds file:line.
std::vector<ChatSegment> render_row(const nlohmann::json& row, const DataConfig& config,
                                    const ChatTemplate* chat_template, const Tokenizer& tokenizer);

}  // namespace ftcore::data

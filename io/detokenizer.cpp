#include "io/tokenizer.h"

#include <stdexcept>

#include "io/utf8.h"

namespace deepinfer::io {

Detokenizer::Detokenizer(std::shared_ptr<const Tokenizer> tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)), skip_special_tokens_(skip_special_tokens) {
  if (!tokenizer_) throw std::invalid_argument("Detokenizer needs a tokenizer");
}

std::string Detokenizer::push(int32_t id) {
  const std::string& bytes = tokenizer_->token_bytes(id);
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return {};
  pending_ += bytes;
  return drain(false);
}

std::string Detokenizer::finish() { return drain(true); }

std::string Detokenizer::drain(bool final) {
  std::string out;
  std::size_t pos = 0;
  while (pos < pending_.size()) {
    const int len = utf8_step(pending_, pos);
    if (len > 0) {
      out.append(pending_, pos, static_cast<std::size_t>(len));
      pos += static_cast<std::size_t>(len);
    } else if (len < 0) {
      out += "\xEF\xBF\xBD";
      pos += static_cast<std::size_t>(-len);
    } else if (final) {
      out += "\xEF\xBF\xBD";
      pos = pending_.size();
    } else {
      break;  // a valid prefix of a character: wait for more bytes
    }
  }
  pending_.erase(0, pos);
  return out;
}

}  // namespace deepinfer::io
